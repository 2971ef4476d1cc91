/* copy.c: dirtybitmap copy (in progress). */
#include <config.h>
#include <stdio.h>
#include <stdlib.h>
#include "dirtybitmap.h"
int
do_copy (int argc, char *argv[])
{
  fprintf (stderr, "%s: copy: not built yet\n", prog);
  return EXIT_FAILURE;
}
