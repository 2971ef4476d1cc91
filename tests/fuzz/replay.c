/* SPDX-License-Identifier: BSD-3-Clause */
/* replay.c: runs the fuzz target fuzz-load.c without libFuzzer, on
 * every file named on the command line or found in a directory named
 * there (not recursively, in name order).  make check replays the seed
 * corpus and the inputs that once found bugs (fuzz/regressions/), with
 * ASan and UBSan when the compiler has them, so that a fixed bug
 * cannot come back unnoticed.
 *
 * A violation aborts in the target (or in a sanitizer), which names
 * the input: replay prints each one's name before running it.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <dirent.h>
#include <sys/stat.h>

extern int LLVMFuzzerInitialize (int *argc, char ***argv);
extern int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static unsigned inputs;

static int
replay_file (const char *path)
{
  FILE *fp = fopen (path, "rb");
  uint8_t *data = NULL;
  size_t size = 0, cap = 0, n;

  if (fp == NULL) {
    fprintf (stderr, "replay: %s: %s\n", path, strerror (errno));
    return -1;
  }
  do {
    if (size == cap) {
      uint8_t *p = realloc (data, cap = cap ? 2 * cap : 65536);
      if (p == NULL) {
        perror ("realloc");
        exit (EXIT_FAILURE);
      }
      data = p;
    }
    n = fread (data + size, 1, cap - size, fp);
    size += n;
  } while (n > 0);
  if (ferror (fp)) {
    fprintf (stderr, "replay: %s: read error\n", path);
    fclose (fp);
    free (data);
    return -1;
  }
  fclose (fp);

  printf ("replay: %s (%zu bytes)\n", path, size);
  fflush (stdout);
  LLVMFuzzerTestOneInput (data, size);
  free (data);
  inputs++;
  return 0;
}

static int
by_name (const void *a, const void *b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

static int
replay_dir (const char *dir)
{
  DIR *d = opendir (dir);
  struct dirent *e;
  char **names = NULL;
  size_t n = 0, i;
  int r = 0;

  if (d == NULL) {
    fprintf (stderr, "replay: %s: %s\n", dir, strerror (errno));
    return -1;
  }
  while ((e = readdir (d)) != NULL) {
    char **p;
    if (e->d_name[0] == '.')
      continue;
    p = realloc (names, (n + 1) * sizeof *names);
    if (p == NULL || (p[n] = malloc (strlen (dir) + strlen (e->d_name) + 2))
        == NULL) {
      perror ("malloc");
      exit (EXIT_FAILURE);
    }
    names = p;
    sprintf (names[n++], "%s/%s", dir, e->d_name);
  }
  closedir (d);
  qsort (names, n, sizeof *names, by_name);
  for (i = 0; i < n; ++i) {
    if (replay_file (names[i]) == -1)
      r = -1;
    free (names[i]);
  }
  free (names);
  return r;
}

int
main (int argc, char *argv[])
{
  int i, r = 0;
  struct stat sb;

  if (argc < 2) {
    fprintf (stderr, "usage: replay FILE|DIR...\n");
    return EXIT_FAILURE;
  }
  LLVMFuzzerInitialize (&argc, &argv);
  for (i = 1; i < argc; ++i) {
    if (stat (argv[i], &sb) == -1) {
      fprintf (stderr, "replay: %s: %s\n", argv[i], strerror (errno));
      r = -1;
    }
    else if (S_ISDIR (sb.st_mode) ? replay_dir (argv[i])
             : replay_file (argv[i]))
      r = -1;
  }
  printf ("replay: %u inputs\n", inputs);
  return r == 0 && inputs > 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
