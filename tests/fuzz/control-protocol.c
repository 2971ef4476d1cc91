/* SPDX-License-Identifier: BSD-3-Clause */
/* control-protocol.c: filter/protocol.c, compiled here for
 * fuzz/replay-control (with the sanitizers of the replay), so that its
 * object stays in this directory rather than in filter/.
 */

#include "../../filter/protocol.c"
