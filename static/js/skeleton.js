/* Skeleton editor: add, remove and reorder assertions (drag the handle, or
 * Alt+Up / Alt+Down inside a row; Alt+Enter adds a row below; Alt+Delete
 * removes one). Without this file the form still works: positions are typed
 * and "remove" is a checkbox. */
(function () {
  "use strict";

  document.addEventListener("DOMContentLoaded", function () {
    document.documentElement.classList.add("js");
    var list = document.getElementById("sk-rows");
    var tpl = document.getElementById("sk-row-template");
    if (!list || !tpl) return;
    var counter = document.getElementById("sk-count");
    var dragged = null;

    function rows() { return Array.prototype.slice.call(list.querySelectorAll(":scope > li.sk-row")); }

    function renumber() {
      var n = 0;
      rows().forEach(function (li, i) {
        li.querySelector("input.sk-pos").value = i + 1;
        if (li.querySelector("textarea").value.trim()) n++;
      });
      if (counter) {
        var min = +counter.getAttribute("data-min"), max = +counter.getAttribute("data-max");
        var msg = n + " assertion" + (n === 1 ? "" : "s");
        if (n && n < min) msg += " — a skeleton usually needs " + min + "–" + max;
        else if (n > max) msg += " — keep only the necessary ones (" + min + "–" + max + ")";
        counter.textContent = msg;
        counter.classList.toggle("warn", (n > 0 && n < min) || n > max);
      }
    }

    function nextJ() {
      var j = 0;
      rows().forEach(function (li) { j = Math.max(j, +li.getAttribute("data-j") || 0); });
      return j + 1;
    }

    function addRow(after) {
      var html = tpl.innerHTML.replace(/__J__/g, String(nextJ()));
      var holder = document.createElement("ol");
      holder.innerHTML = html.trim();
      var li = holder.firstElementChild;
      if (after && after.nextSibling) list.insertBefore(li, after.nextSibling);
      else list.appendChild(li);
      if (window.htmx) window.htmx.process(li);
      renumber();
      li.querySelector("textarea").focus();
      return li;
    }

    function removeRow(li) {
      var all = rows();
      var focusTo = li.nextElementSibling || li.previousElementSibling;
      if (all.length === 1) {
        li.querySelector("textarea").value = "";
        li.querySelector('input[name^="check-"]').value = "";
      } else {
        li.remove();
      }
      renumber();
      if (focusTo) focusTo.querySelector("textarea").focus();
    }

    function move(li, delta) {
      if (delta < 0 && li.previousElementSibling) list.insertBefore(li, li.previousElementSibling);
      else if (delta > 0 && li.nextElementSibling) list.insertBefore(li.nextElementSibling, li);
      renumber();
    }

    // The spare blank row serves forms without JavaScript; here "+ Add" does.
    var filled = rows().filter(function (li) { return li.querySelector("textarea").value.trim(); });
    if (filled.length) rows().forEach(function (li) {
      if (!li.querySelector("textarea").value.trim() && !li.querySelector('input[name^="check-"]').value.trim()) li.remove();
    });

    list.addEventListener("click", function (e) {
      var li = e.target.closest("li.sk-row");
      if (!li) return;
      if (e.target.closest(".sk-up")) move(li, -1);
      else if (e.target.closest(".sk-down")) move(li, 1);
      else if (e.target.closest(".sk-del")) removeRow(li);
    });

    list.addEventListener("keydown", function (e) {
      var li = e.target.closest("li.sk-row");
      if (!li || !e.altKey) return;
      var focused = document.activeElement;
      if (e.key === "ArrowUp" || e.key === "ArrowDown") {
        e.preventDefault();
        move(li, e.key === "ArrowUp" ? -1 : 1);
        if (focused) focused.focus();
      } else if (e.key === "Enter") {
        e.preventDefault();
        addRow(li);
      } else if (e.key === "Delete" || e.key === "Backspace") {
        e.preventDefault();
        removeRow(li);
      }
    });

    list.addEventListener("input", renumber);

    // Drag and drop by the handle.
    list.addEventListener("dragstart", function (e) {
      var li = e.target.closest && e.target.closest("li.sk-row");
      if (!li) return;
      dragged = li;
      li.classList.add("dragging");
      e.dataTransfer.effectAllowed = "move";
      e.dataTransfer.setData("text/plain", li.getAttribute("data-j"));
      if (e.dataTransfer.setDragImage) e.dataTransfer.setDragImage(li, 20, 20);
    });
    list.addEventListener("dragover", function (e) {
      if (!dragged) return;
      e.preventDefault();
      var over = e.target.closest("li.sk-row");
      if (!over || over === dragged) return;
      var box = over.getBoundingClientRect();
      var before = e.clientY < box.top + box.height / 2;
      list.insertBefore(dragged, before ? over : over.nextSibling);
    });
    list.addEventListener("drop", function (e) { if (dragged) e.preventDefault(); });
    list.addEventListener("dragend", function () {
      if (dragged) dragged.classList.remove("dragging");
      dragged = null;
      renumber();
    });

    var add = document.getElementById("sk-add");
    if (add) add.addEventListener("click", function () {
      var all = rows();
      addRow(all[all.length - 1]);
    });

    renumber();
  });
})();
