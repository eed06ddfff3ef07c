// The tablekit console's one script: refreshes the overview's live part in place, and
// ticks every message box of a poison page at once. The page works without it.
"use strict";

(function () {
  const body = document.body;
  const seconds = Number(body.dataset.refresh || 0);
  const live = document.getElementById("live");
  if (live && seconds > 0) {
    const refresh = async () => {
      // Not while the operator is choosing in the job form.
      const active = document.activeElement;
      if (active && live.contains(active) && active.tagName === "SELECT") return;
      try {
        const response = await fetch(live.dataset.src, { credentials: "same-origin" });
        if (response.ok) {
          live.innerHTML = await response.text();
          live.classList.remove("stale");
        } else {
          live.classList.add("stale");
        }
      } catch (_) {
        live.classList.add("stale");
      }
    };
    setInterval(refresh, seconds * 1000);
  }
  const all = document.getElementById("all");
  if (all) {
    all.addEventListener("change", () => {
      for (const box of document.querySelectorAll('input[name="id"]')) box.checked = all.checked;
    });
  }
})();
