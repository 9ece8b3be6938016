// A GET form marked data-drop-empty sends (and, with hx-push-url, puts in the address bar) only the fields
// that hold a value: the search form has about thirty filters, and its pushed URLs listed every empty one.
document.addEventListener("htmx:configRequest", function (event) {
  var elt = event.detail.elt;
  if (!elt || !elt.closest || !elt.closest("form[data-drop-empty]")) return;
  var data = event.detail.formData;
  Array.from(new Set(data.keys())).forEach(function (key) {
    var kept = data.getAll(key).filter(function (value) { return value !== ""; });
    data.delete(key);
    kept.forEach(function (value) { data.append(key, value); });
  });
});
