/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The login page: POST /ui/login answers a wrong token with a redirect
 * to /ui/login#failed (docs/ui.md). */
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  if (location.hash === "#failed") {
    document.getElementById("failed").hidden = false;
  }
});
