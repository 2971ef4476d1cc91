/* SPDX-License-Identifier: BSD-3-Clause */
/* testpause.h: pause points, for the tests that must hold a thread at
 * one exact step of a race (tests/pause.py).  Nothing happens unless
 * the environment names the point.
 */

#ifndef DIRTYBITMAP_TESTPAUSE_H
#define DIRTYBITMAP_TESTPAUSE_H

/* If DIRTYBITMAP_TEST_PAUSE (names separated by spaces) names point,
 * the first thread that reaches it tells the test, and waits until
 * the test lets it go, through two FIFOs that the test made in the
 * directory DIRTYBITMAP_TEST_PAUSE_DIR (an absolute path):
 *
 *   POINT.reached   opened for writing and closed: the thread is here;
 *   POINT.release   opened for reading and read to its end: go on.
 *
 * Each point pauses once; later threads pass.  With the variables
 * unset (read once) a point costs a pthread_once and a load.
 */
extern void test_pause_point (const char *point);

#endif /* DIRTYBITMAP_TESTPAUSE_H */
