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
  /* Steps of both channels are the form's li.step items in reading order
   * (thought first). A long thought comes in <details> blocks whose rows htmx
   * loads when they come into view; the list of steps is rebuilt after every
   * load, and a block not loaded yet answers for its steps from the label
   * summary the server wrote on it (data-labelled, data-first-invalid ...). */
  function initReview(form) {
    var items = [], steps = [], byNumber = {};
    var skeletonItems = Array.prototype.slice.call(document.querySelectorAll("#skeleton-list > li"));
    var cur = -1, curNumber = 0;
    var dirty = false;
    var hashTimer = null;
    var pending = null;  // {number, scroll} to select once its block has loaded
    var search = { q: "", hits: [], at: -1 };
    var shownError = 0;
    var total = +form.getAttribute("data-n") || 0;

    function verdictOf(s) {
      for (var i = 0; i < s.radios.length; i++) if (s.radios[i].checked) return s.radios[i].value;
      return "";
    }

    function collect() {
      items = Array.prototype.slice.call(form.querySelectorAll("li.step"));
      byNumber = {};
      steps = items.map(function (li) {
        var s = {
          li: li, number: +li.getAttribute("data-step"),
          radios: Array.prototype.slice.call(li.querySelectorAll('input[type="radio"]')),
          refs: Array.prototype.slice.call(li.querySelectorAll('.refs input[type="checkbox"]')),
          tags: Array.prototype.slice.call(li.querySelectorAll('.ftags input[type="checkbox"]')),
          note: li.querySelector("input.note")
        };
        byNumber[s.number] = s;
        return s;
      });
      cur = curNumber && byNumber[curNumber] ? items.indexOf(byNumber[curNumber].li) : cur;
      highlight();
    }

    function blocks() { return Array.prototype.slice.call(document.querySelectorAll("details.thought-block")); }
    function unloaded(b) { return !!b.querySelector(".block-loading"); }
    function blockOf(number) {
      var all = blocks();
      for (var i = 0; i < all.length; i++) {
        if (number >= +all[i].getAttribute("data-first") && number <= +all[i].getAttribute("data-last")) return all[i];
      }
      return null;
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
        if (v === "invalid" && (!firstError || steps[i].number < firstError)) firstError = steps[i].number;
        if (v === "valid") steps[i].refs.forEach(function (cb) { if (cb.checked) covered[cb.value] = true; });
      }
      blocks().forEach(function (b) {
        if (!unloaded(b)) return;
        labelled += +b.getAttribute("data-labelled");
        var fi = +b.getAttribute("data-first-invalid");
        if (fi && (!firstError || fi < firstError)) firstError = fi;
      });
      if (firstError !== shownError) {
        if (shownError && byNumber[shownError]) byNumber[shownError].li.classList.remove("first-error");
        if (firstError && byNumber[firstError]) byNumber[firstError].li.classList.add("first-error");
        shownError = firstError;
      }
      var n = total || steps.length;
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

    function remember() {
      if (!history.replaceState) return;
      clearTimeout(hashTimer);
      hashTimer = setTimeout(function () { history.replaceState(null, "", "#s" + curNumber); }, 250);
    }

    function select(i, scroll, initial) {
      if (!steps.length) return;
      i = Math.max(0, Math.min(steps.length - 1, i));
      if (cur >= 0 && steps[cur]) { steps[cur].li.classList.remove("current"); steps[cur].li.removeAttribute("aria-current"); }
      cur = i;
      curNumber = steps[cur].number;
      var b = steps[cur].li.closest("details");
      if (b && !b.open) b.open = true;
      steps[cur].li.classList.add("current");
      steps[cur].li.setAttribute("aria-current", "step");
      if (scroll) steps[cur].li.scrollIntoView({ block: "nearest" });
      // Remember the place for a reload (debounced: browsers throttle history updates).
      if (!initial) remember();
    }

    // Go to step `number`: select it when it is on the page, else open and load its block first.
    function goTo(number, scroll, then) {
      if (byNumber[number]) { select(items.indexOf(byNumber[number].li), scroll !== false); return true; }
      var b = blockOf(number);
      if (!b) return false;
      pending = then || { number: number, scroll: scroll !== false };
      b.open = true;
      var loader = b.querySelector(".block-loading");
      if (loader && window.htmx) window.htmx.trigger(loader, "loadblock");
      b.scrollIntoView({ block: "start" });
      return true;
    }

    function move(delta) {
      if (!steps.length) return;
      var next = (cur < 0 ? 0 : steps[cur].number) + delta;
      if (next < 1 || (total && next > total)) return;
      if (!goTo(next)) select(cur + delta, true);
    }

    function setVerdict(v) {
      var s = steps[cur];
      if (!s) return;
      s.radios.forEach(function (r) { r.checked = r.value === v; });
      paint(s); summarize(); markDirty();
    }

    // Step-function tags: "f" arms the tag keys, then 1..8 toggles the n-th function of the current
    // step (a step may serve several); any other key disarms them. Saved with the labels ("s").
    var tagMode = false;
    function armTags(on) {
      tagMode = on;
      document.body.classList.toggle("tag-mode", on);
    }
    function toggleTag(n) {
      var s = steps[cur];
      if (!s || !s.tags[n - 1]) return;
      s.tags[n - 1].checked = !s.tags[n - 1].checked;
      markDirty();
    }

    function toggleRef(k) {
      var s = steps[cur];
      if (!s) return;
      s.refs.forEach(function (cb) { if (+cb.value === k) cb.checked = !cb.checked; });
      summarize(); markDirty();
    }

    // The first step after step `from` that passes `test` (a loaded step) or, in a block not loaded
    // yet, whose summary says it holds one (`attr` > 0).
    function findAfter(from, test, attr) {
      var best = 0;
      steps.forEach(function (s) { if (s.number > from && test(s) && (!best || s.number < best)) best = s.number; });
      var target = best ? { number: best } : null;
      blocks().forEach(function (b) {
        if (!unloaded(b) || !(+b.getAttribute(attr) > 0) || +b.getAttribute("data-last") <= from) return;
        var first = Math.max(+b.getAttribute("data-first"), from + 1);
        if (!target || first < target.number) target = { number: first, block: b };
      });
      return target;
    }
    // After the current step, else from the top (once round).
    function findNext(test, attr) {
      var from = cur < 0 ? 0 : steps[cur].number;
      return findAfter(from, test, attr) || (from > 0 ? findAfter(0, test, attr) : null);
    }

    function jump(target, test) {
      if (!target) return;
      if (!target.block) { goTo(target.number); return; }
      // load the block, then look inside it
      goTo(target.number, true, { test: test, from: target.number - 1, scroll: true });
    }

    function unlabelled(s) { return !verdictOf(s); }
    // Two visible verdicts differ: mine (as it stands now) and the others' shown under the step.
    function conflicting(s) {
      var seen = {}, n = 0, mine = verdictOf(s);
      if (mine) { seen[mine] = true; n++; }
      Array.prototype.forEach.call(s.li.querySelectorAll(".others .verdict"), function (el) {
        var v = el.textContent.trim();
        if (v && !seen[v]) { seen[v] = true; n++; }
      });
      return n > 1;
    }

    function firstError() {
      var fe = document.getElementById("first-error");
      var m = fe && /#s(\d+)$/.exec(fe.getAttribute("href") || "");
      if (m) goTo(+m[1]);
    }

    /* search: the server lists the steps of both channels whose text holds the query */
    function highlight() {
      items.forEach(function (li) { li.classList.remove("match"); });
      Array.prototype.slice.call(form.querySelectorAll("mark.hit")).forEach(function (m) {
        var t = document.createTextNode(m.textContent);
        m.parentNode.replaceChild(t, m);
        t.parentNode.normalize();
      });
      if (!search.q) return;
      var q = search.q.toLowerCase();
      search.hits.forEach(function (n) {
        var s = byNumber[n];
        if (!s) return;
        s.li.classList.add("match");
        var text = s.li.querySelector(".step-text");
        if (!text) return;
        var walker = document.createTreeWalker(text, NodeFilter.SHOW_TEXT);
        var nodes = [];
        while (walker.nextNode()) nodes.push(walker.currentNode);
        nodes.forEach(function (node) {
          var value = node.nodeValue, lower = value.toLowerCase(), at = lower.indexOf(q);
          if (at < 0) return;
          var frag = document.createDocumentFragment(), last = 0;
          while (at >= 0) {
            frag.appendChild(document.createTextNode(value.slice(last, at)));
            var mark = document.createElement("mark");
            mark.className = "hit";
            mark.textContent = value.slice(at, at + q.length);
            frag.appendChild(mark);
            last = at + q.length;
            at = lower.indexOf(q, last);
          }
          frag.appendChild(document.createTextNode(value.slice(last)));
          node.parentNode.replaceChild(frag, node);
        });
      });
    }

    function showSearch() {
      var status = document.getElementById("search-status");
      if (!status) return;
      status.textContent = !search.q ? "" : search.hits.length
        ? (search.at + 1) + " of " + search.hits.length + " steps" : "no step contains it";
    }

    function step(delta) {
      if (!search.hits.length) return;
      search.at = (search.at + delta + search.hits.length) % search.hits.length;
      showSearch();
      goTo(search.hits[search.at]);
    }

    function runSearch(q, delta) {
      var box = document.getElementById("trace-search");
      if (!box) return;
      if (q === search.q) { step(delta); return; }
      var url = box.getAttribute("data-url") + "?q=" + encodeURIComponent(q);
      fetch(url, { headers: { "X-Requested-With": "fetch" }, credentials: "same-origin" })
        .then(function (r) { return r.json(); })
        .then(function (data) {
          search = { q: data.q, hits: data.steps, at: -1 };
          highlight();
          if (search.hits.length) step(1); else showSearch();
        });
    }

    var searchBox = document.getElementById("trace-search");
    if (searchBox) {
      searchBox.addEventListener("keydown", function (e) {
        if (e.key === "Enter") { e.preventDefault(); runSearch(searchBox.value.trim(), e.shiftKey ? -1 : 1); }
      });
      var prev = document.getElementById("search-prev"), next = document.getElementById("search-next");
      if (prev) prev.addEventListener("click", function () { runSearch(searchBox.value.trim(), -1); });
      if (next) next.addEventListener("click", function () { runSearch(searchBox.value.trim(), 1); });
    }
    var expand = document.getElementById("expand-all"), collapse = document.getElementById("collapse-all");
    if (expand) expand.addEventListener("click", function () { blocks().forEach(function (b) { b.open = true; }); });
    if (collapse) collapse.addEventListener("click", function () { blocks().forEach(function (b) { b.open = false; }); });

    // A block's rows arrived: rebuild the list, paint the search, finish a pending move.
    // htmx fires afterSettle once per swapped element (a block is 100 <li>s); the work below
    // reads the whole list, so it runs once, after the last of them (a microtask runs when
    // htmx's settle loop has returned).
    var settleQueued = false;
    document.body.addEventListener("htmx:afterSettle", function () {
      if (settleQueued) return;
      settleQueued = true;
      queueMicrotask(afterBlock);
    });
    function afterBlock() {
      settleQueued = false;
      collect();
      summarize();
      if (!pending) return;
      var p = pending;
      pending = null;
      if (p.number && byNumber[p.number]) select(items.indexOf(byNumber[p.number].li), p.scroll);
      else if (p.test) {
        var hit = null;
        steps.forEach(function (s) { if (!hit && s.number > p.from && p.test(s)) hit = s; });
        if (hit) select(items.indexOf(hit.li), true);
      }
    }

    collect();
    shownError = (function () { var m = form.querySelector("li.step.first-error"); return m ? +m.getAttribute("data-step") : 0; })();
    // Start where the URL points, else at the first step still to label.
    var m = /^#s(\d+)$/.exec(location.hash);
    if (m) {
      if (!goTo(+m[1], true)) select(0, false, true);
      // The browser's own jump to the fragment puts the step at the top and scrolls the header away (issue 31):
      // once the page has loaded, start from the top and scroll only as far as the step needs to be seen.
      var keepHeader = function () {
        var li = steps[cur] && steps[cur].li;
        if (!li || li.id !== "s" + m[1]) return;
        window.scrollTo(0, 0);
        li.scrollIntoView({ block: "nearest" });
      };
      if (document.readyState === "complete") keepHeader(); else window.addEventListener("load", keepHeader, { once: true });
    }
    else {
      var u = findAfter(0, unlabelled, "data-unlabelled");
      if (u && !u.block) select(items.indexOf(byNumber[u.number].li), u.number > 1, true);
      else if (u) jump(u, unlabelled);
      else select(0, false, true);
    }

    form.addEventListener("click", function (e) {
      var li = e.target.closest("li.step");
      if (li) select(items.indexOf(li), false);
    });
    form.addEventListener("change", function (e) {
      var li = e.target.closest("li.step");
      if (!li) return;
      paint(steps[items.indexOf(li)]);
      summarize(); markDirty();
    });
    form.addEventListener("input", function (e) { if (e.target.classList.contains("note")) markDirty(); });
    ["rating", "answer-select"].forEach(function (id) {
      var el = document.getElementById(id);
      if (el) el.addEventListener("change", markDirty);
    });

    form.addEventListener("htmx:beforeRequest", function (e) {
      if (e.target !== form) return;
      dirty = false; document.body.classList.remove("unsaved");
    });
    form.addEventListener("htmx:afterRequest", function (e) {
      if (e.target !== form) return;
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
      if (tagMode) {
        armTags(false);
        if (/^[1-8]$/.test(k)) { toggleTag(+k); e.preventDefault(); return; }
        if (k === "Escape") { e.preventDefault(); return; }
      }
      if (k === "f") armTags(true);
      else if (k === "j" || k === "ArrowDown") move(1);
      else if (k === "k" || k === "ArrowUp") move(-1);
      else if (k === "g" || k === "Home") goTo(1);
      else if (k === "G" || k === "End") goTo(total || steps.length);
      else if (k === "u") jump(findNext(unlabelled, "data-unlabelled"), unlabelled);
      else if (k === "d") jump(findNext(conflicting, "data-conflicts"), conflicting);
      else if (k === "e") firstError();
      else if (k === "/") { if (searchBox) searchBox.focus(); }
      else if (k === "]") runSearch(searchBox ? searchBox.value.trim() : "", 1);
      else if (k === "[") runSearch(searchBox ? searchBox.value.trim() : "", -1);
      else if (k === "o") { var b = steps[cur] && steps[cur].li.closest("details"); if (b) b.open = !b.open; }
      else if (k === "v" || k === "i" || k === "n") {
        setVerdict({ v: "valid", i: "invalid", n: "neutral" }[k]);
        move(1);
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
