// The tablekit console's one script: refreshes the overview's live part in place, ticks
// every message box of a poison page at once, and reloads a page the browser restored
// from its back-forward cache (its counts and buttons would be those of the past; the
// server refuses a button that already acted, and the reload shows what is true now).
// The page works without it.
"use strict";

window.addEventListener("pageshow", (event) => {
  if (event.persisted) window.location.reload();
});

(function () {
  const body = document.body;
  const seconds = Number(body.dataset.refresh || 0);
  const live = document.getElementById("live");
  if (live && seconds > 0) {
    let timer = 0;
    // The session is gone (a cleared cookie, a restarted console): say so in place and
    // stop asking; the data shown stays, marked stale.
    const signedOut = () => {
      clearInterval(timer);
      live.classList.add("stale");
      if (document.getElementById("signed-out")) return;
      const notice = document.createElement("div");
      notice.id = "signed-out";
      notice.className = "banner failed";
      notice.setAttribute("role", "alert");
      notice.append("Signed out \u2014 ");
      const link = document.createElement("a");
      link.href = "/login";
      link.textContent = "sign in again";
      notice.append(link);
      live.parentNode.insertBefore(notice, live);
    };
    const refresh = async () => {
      // Not while the operator is choosing in the job form.
      const active = document.activeElement;
      if (active && live.contains(active) && active.tagName === "SELECT") return;
      try {
        const response = await fetch(live.dataset.src, {
          credentials: "same-origin",
          headers: { "X-Tablekit-Fetch": "1" },
        });
        if (response.status === 401) {
          signedOut();
        } else if (response.ok && response.headers.get("X-Tablekit-Live") === "1") {
          // Only the live part itself is pasted, never another page.
          live.innerHTML = await response.text();
          live.classList.remove("stale");
        } else {
          live.classList.add("stale");
        }
      } catch (_) {
        live.classList.add("stale");
      }
    };
    timer = setInterval(refresh, seconds * 1000);
  }
  const all = document.getElementById("all");
  if (all) {
    all.addEventListener("change", () => {
      for (const box of document.querySelectorAll('input[name="h"]')) box.checked = all.checked;
    });
  }
})();
