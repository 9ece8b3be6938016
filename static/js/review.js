/* Keyboard-first reviewing (no framework). The page is a plain form that
 * works without this file; the script adds keys, the running summary (labels
 * done, first error, skeleton coverage) and an unsaved-changes guard. Saves
 * stay htmx form posts carrying the review version.
 * Also drives the adjudication page's keys and [data-autosubmit] selects. */
(function () {
  "use strict";

  function typingIn(el) {
    if (!el || !el.tagName) return false;
    if (el.isContentEditable) return true;
    if (el.tagName === "TEXTAREA" || el.tagName === "SELECT") return true;
    return el.tagName === "INPUT" && el.type !== "radio" && el.type !== "checkbox" && el.type !== "button" && el.type !== "submit";
  }

  function toggleHelp(force) {
    var d = document.getElementById("help");
    if (!d || typeof d.showModal !== "function") return;
    var open = force === undefined ? !d.open : force;
    if (open && !d.open) d.showModal();
    else if (!open && d.open) d.close();
  }

  function submitWith(form, buttonId) {
    // A click (not requestSubmit) so htmx sends the button's name and value.
    var btn = buttonId && document.getElementById(buttonId);
    if (btn) btn.click();
    else if (form.requestSubmit) form.requestSubmit();
    else form.submit();
  }

  /* ---------------------------------------------------------------- review */
  function initReview(form) {
    var list = document.getElementById("steps");
    var items = list ? Array.prototype.slice.call(list.querySelectorAll(":scope > li.step")) : [];
    var steps = items.map(function (li) {
      return {
        li: li,
        radios: Array.prototype.slice.call(li.querySelectorAll('input[type="radio"]')),
        refs: Array.prototype.slice.call(li.querySelectorAll('input[type="checkbox"]')),
        note: li.querySelector("input.note")
      };
    });
    var skeletonItems = Array.prototype.slice.call(document.querySelectorAll("#skeleton-list > li"));
    var cur = -1;
    var dirty = false;
    var hashTimer = null;
    var marked = list ? list.querySelector(":scope > li.step.first-error") : null;
    var shownError = marked ? items.indexOf(marked) + 1 : 0;

    function verdictOf(s) {
      for (var i = 0; i < s.radios.length; i++) if (s.radios[i].checked) return s.radios[i].value;
      return "";
    }

    function paint(s) {
      var v = verdictOf(s);
      s.li.classList.remove("is-valid", "is-invalid", "is-neutral");
      if (v) s.li.classList.add("is-" + v);
    }

    function summarize() {
      var labelled = 0, firstError = 0, covered = {};
      for (var i = 0; i < steps.length; i++) {
        var v = verdictOf(steps[i]);
        if (v) labelled++;
        if (v === "invalid" && !firstError) firstError = i + 1;
        if (v === "valid") steps[i].refs.forEach(function (cb) { if (cb.checked) covered[cb.value] = true; });
      }
      if (firstError !== shownError) {  // touch only the two steps concerned
        if (shownError) steps[shownError - 1].li.classList.remove("first-error");
        if (firstError) steps[firstError - 1].li.classList.add("first-error");
        shownError = firstError;
      }
      var n = steps.length;
      var el = document.getElementById("labelled-count");
      if (el) el.textContent = labelled;
      var bar = document.getElementById("labelled-bar");
      if (bar) bar.style.width = (n ? Math.round(100 * labelled / n) : 0) + "%";
      var fe = document.getElementById("first-error");
      if (fe) {
        fe.textContent = firstError ? "step " + firstError : "none";
        fe.setAttribute("href", firstError ? "#s" + firstError : "#");
        fe.classList.toggle("none", !firstError);
      }
      var nCovered = 0;
      skeletonItems.forEach(function (li) {
        var on = !!covered[li.getAttribute("data-ref")];
        li.classList.toggle("covered", on);
        if (on) nCovered++;
      });
      var cov = document.getElementById("coverage-count");
      if (cov) cov.textContent = nCovered;
    }

    function markDirty() { dirty = true; document.body.classList.add("unsaved"); }

    function select(i, scroll, initial) {
      if (!steps.length) return;
      i = Math.max(0, Math.min(steps.length - 1, i));
      if (cur >= 0 && steps[cur]) { steps[cur].li.classList.remove("current"); steps[cur].li.removeAttribute("aria-current"); }
      cur = i;
      steps[cur].li.classList.add("current");
      steps[cur].li.setAttribute("aria-current", "step");
      if (scroll) steps[cur].li.scrollIntoView({ block: "nearest" });
      // Remember the place for a reload (not while loading: the browser would
      // scroll to the new fragment when the load finishes). Debounced: the
      // browser throttles history updates when keys are held down.
      if (!initial && history.replaceState) {
        clearTimeout(hashTimer);
        hashTimer = setTimeout(function () { history.replaceState(null, "", "#s" + (cur + 1)); }, 250);
      }
    }

    function setVerdict(v) {
      var s = steps[cur];
      if (!s) return;
      s.radios.forEach(function (r) { r.checked = r.value === v; });
      paint(s); summarize(); markDirty();
    }

    function toggleRef(k) {
      var s = steps[cur];
      if (!s) return;
      s.refs.forEach(function (cb) { if (+cb.value === k) cb.checked = !cb.checked; });
      summarize(); markDirty();
    }

    function firstUnlabelled() {
      for (var i = 0; i < steps.length; i++) if (!verdictOf(steps[i])) return i;
      return -1;
    }

    // Start where the URL points, else at the first step still to label.
    var m = /^#s(\d+)$/.exec(location.hash);
    var start = m ? +m[1] - 1 : firstUnlabelled();
    select(start < 0 ? 0 : start, start > 0, true);

    if (list) {
      list.addEventListener("click", function (e) {
        var li = e.target.closest("li.step");
        if (li) select(items.indexOf(li), false);
      });
      list.addEventListener("change", function (e) {
        var li = e.target.closest("li.step");
        if (!li) return;
        paint(steps[items.indexOf(li)]);
        summarize(); markDirty();
      });
      list.addEventListener("input", function (e) { if (e.target.classList.contains("note")) markDirty(); });
    }
    ["rating", "answer-select"].forEach(function (id) {
      var el = document.getElementById(id);
      if (el) el.addEventListener("change", markDirty);
    });

    form.addEventListener("htmx:beforeRequest", function () { dirty = false; document.body.classList.remove("unsaved"); });
    form.addEventListener("htmx:afterRequest", function (e) {
      var xhr = e.detail && e.detail.xhr;
      if (xhr && xhr.status >= 400) markDirty();
    });
    form.addEventListener("submit", function () { dirty = false; });
    // "Reload the page" after a conflict drops the unsaved choices on purpose.
    document.addEventListener("click", function (e) {
      if (e.target.closest && e.target.closest("a[data-discard]")) dirty = false;
    });
    window.addEventListener("beforeunload", function (e) {
      if (dirty) { e.preventDefault(); e.returnValue = ""; }
    });

    document.addEventListener("keydown", function (e) {
      var t = e.target;
      if (typingIn(t)) {
        // Enter in a note or the rating box, or Escape anywhere, hands the keys back to the page (the rating
        // keeps its value: it is saved with the labels, not by Enter submitting the form).
        if (e.key === "Escape" || (e.key === "Enter" && (t.classList.contains("note") || t.id === "rating"))) {
          e.preventDefault();
          t.blur();
        }
        return;
      }
      if (e.ctrlKey || e.metaKey || e.altKey) return;
      var help = document.getElementById("help");
      if (help && help.open && e.key !== "?") return;
      var k = e.key;
      var handled = true;
      if (k === "j" || k === "ArrowDown") select(cur + 1, true);
      else if (k === "k" || k === "ArrowUp") select(cur - 1, true);
      else if (k === "g" || k === "Home") select(0, true);
      else if (k === "G" || k === "End") select(steps.length - 1, true);
      else if (k === "u") { var u = firstUnlabelled(); if (u >= 0) select(u, true); }
      else if (k === "v" || k === "i" || k === "n") {
        setVerdict({ v: "valid", i: "invalid", n: "neutral" }[k]);
        if (cur < steps.length - 1) select(cur + 1, true);
      }
      else if (k === "x") setVerdict("");
      else if (/^[0-9]$/.test(k)) toggleRef(k === "0" ? 10 : +k);
      else if (k === "c") { if (steps[cur] && steps[cur].note) steps[cur].note.focus(); }
      else if (k === "r") { var r = document.getElementById("rating"); if (r) r.focus(); }
      else if (k === "a") { var a = document.getElementById("answer-select"); if (a) a.focus(); }
      else if (k === "t") { var raw = document.querySelector("details.raw"); if (raw) raw.open = !raw.open; }
      else if (k === "s") submitWith(form, "save-btn");
      else if (k === "S") submitWith(form, "next-btn");
      else if (k === "?") toggleHelp();
      else handled = false;
      if (handled) e.preventDefault();
    });

    summarize();
  }

  /* ---------------------------------------------------------- adjudication */
  function initAdjudication(container) {
    var cur = 0;
    function items() { return Array.prototype.slice.call(container.querySelectorAll("article.adj-item")); }
    function select(i) {
      var all = items();
      if (!all.length) return;
      cur = Math.max(0, Math.min(all.length - 1, i));
      all.forEach(function (a, j) { a.classList.toggle("current", j === cur); });
      all[cur].scrollIntoView({ block: "nearest" });
    }
    container.addEventListener("click", function (e) {
      var a = e.target.closest("article.adj-item");
      if (a) { var i = items().indexOf(a); if (i >= 0) { cur = i; items().forEach(function (x, j) { x.classList.toggle("current", j === i); }); } }
    });
    document.addEventListener("keydown", function (e) {
      var t = e.target;
      if (typingIn(t)) {
        if (e.key === "Enter" && (e.ctrlKey || e.metaKey) && t.form) { e.preventDefault(); submitWith(t.form); }
        else if (e.key === "Escape") t.blur();
        return;
      }
      if (e.ctrlKey || e.metaKey || e.altKey) return;
      var item = items()[cur];
      var k = e.key, handled = true;
      if (k === "j") select(cur + 1);
      else if (k === "k") select(cur - 1);
      else if (item && (k === "v" || k === "i" || k === "n")) {
        var v = { v: "valid", i: "invalid", n: "neutral" }[k];
        var r = item.querySelector('input[name="verdict"][value="' + v + '"]');
        if (r) r.checked = true;
        var reason = item.querySelector('input[name="reason"]');
        if (reason) reason.focus();
      }
      else if (item && /^[0-9]$/.test(k)) {
        var cb = item.querySelector('input[name="refs"][value="' + (k === "0" ? 10 : k) + '"]');
        if (cb) cb.checked = !cb.checked;
      }
      else if (item && k === "c") { var rs = item.querySelector('input[name="reason"]'); if (rs) rs.focus(); }
      else handled = false;
      if (handled) e.preventDefault();
    });
    select(0);
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.documentElement.classList.add("js");
    var form = document.getElementById("review-form");
    if (form) initReview(form);
    var adj = document.getElementById("adjudication-items");
    if (adj) initAdjudication(adj);
    document.querySelectorAll("[data-help-open]").forEach(function (b) {
      b.addEventListener("click", function () { toggleHelp(true); });
    });
    document.querySelectorAll("select[data-autosubmit]").forEach(function (s) {
      s.addEventListener("change", function () { submitWith(s.form); });
    });
  });
})();
