/* hetplanner dashboard: renders the server-built Plotly figures, follows runs and sweeps
 * while a worker runs them, and makes the scenario builder react to the policy, the length
 * distribution and the workload source. Every page works without it (forms submit to the
 * server, which renders everything); this only adds the interactive parts. */
(function () {
  "use strict";

  var PLOT_CONFIG = { responsive: true, displaylogo: false, toImageButtonOptions: { scale: 2 } };

  function plot(el, fig) {
    if (!window.Plotly || !fig) { return; }
    window.Plotly.newPlot(el, fig.data || [], fig.layout || {}, PLOT_CONFIG);
  }

  function renderFigures(root) {
    (root || document).querySelectorAll("[data-figure]").forEach(function (el) {
      var script = document.getElementById(el.getAttribute("data-figure"));
      if (!script) { return; }
      try {
        plot(el, JSON.parse(script.textContent));
      } catch (err) {
        el.textContent = "This chart could not be drawn: " + err;
      }
    });
  }

  function loadLazyFigures() {
    document.querySelectorAll("[data-figure-src]").forEach(function (fig) {
      var target = fig.querySelector(".plot");
      var caption = fig.querySelector("figcaption");
      fetch(fig.getAttribute("data-figure-src"), { credentials: "same-origin" })
        .then(function (r) { return r.json().then(function (body) { return { ok: r.ok, body: body }; }); })
        .then(function (res) {
          var body = res.body || {};
          if (body.notes && body.notes.length && caption) { caption.textContent = body.notes.join(" · "); }
          if (!res.ok || !body.figure) {
            target.innerHTML = "";
            var p = document.createElement("p");
            p.className = "muted";
            p.textContent = body.error || (body.notes && body.notes.length ? "" : "No data for this chart.");
            target.appendChild(p);
            if (!body.figure && !body.error && !(body.notes && body.notes.length)) { fig.hidden = true; }
            return;
          }
          target.innerHTML = "";
          target.setAttribute("data-loaded", "true");
          plot(target, body.figure);
        })
        .catch(function (err) { target.textContent = "This chart could not be loaded: " + err; });
    });
  }

  /* The run page's comparison charts: one request for all of them (charts.json), each
   * drawn into the element of its id. */
  function loadCharts() {
    document.querySelectorAll("[data-charts-src]").forEach(function (box) {
      fetch(box.getAttribute("data-charts-src"), { credentials: "same-origin" })
        .then(function (r) {
          if (!r.ok) { throw new Error("HTTP " + r.status); }
          return r.json();
        })
        .then(function (body) {
          var charts = (body && body.charts) || {};
          Object.keys(charts).forEach(function (id) {
            var el = document.getElementById(id);
            if (!el) { return; }
            el.innerHTML = "";
            el.setAttribute("data-loaded", "true");
            plot(el, charts[id]);
          });
        })
        .catch(function (err) { box.textContent = "The charts could not be loaded: " + err; });
    });
  }

  /* --- runs and sweeps: poll the status endpoint until the work is final ------------- */
  function followStatus() {
    var box = document.querySelector("[data-status-url]");
    if (!box || box.getAttribute("data-final") === "true") { return; }
    var url = box.getAttribute("data-status-url");
    var bar = document.getElementById("run-progress");
    var text = document.getElementById("run-progress-text");
    var badge = document.getElementById("run-status-badge");
    var errBox = document.getElementById("run-error");
    var errText = document.getElementById("run-error-text");
    var delay = 700;

    function show(s) {
      var p = Math.max(0, Math.min(100, s.status === "succeeded" ? 100 : (s.progress || 0)));
      if (bar) {
        bar.setAttribute("aria-valuenow", String(p));
        bar.setAttribute("data-progress", String(p));
        var inner = bar.querySelector(".bar");
        if (inner) { inner.style.width = p + "%"; }
      }
      if (text) { text.textContent = p + " %"; }
      if (badge && s.status_display) {
        badge.textContent = s.status_display;
        badge.className = "badge status-" + s.status;
      }
      box.setAttribute("data-status", s.status);
      if (s.error && errBox && errText) { errText.textContent = s.error; errBox.hidden = false; }
    }

    function tick() {
      fetch(url, { credentials: "same-origin", cache: "no-store" })
        .then(function (r) { if (!r.ok) { throw new Error("HTTP " + r.status); } return r.json(); })
        .then(function (s) {
          show(s);
          if (s.final) {
            box.setAttribute("data-final", "true");
            // the page renders the results (or the error) server-side: load it again
            window.setTimeout(function () { window.location.reload(); }, 400);
            return;
          }
          delay = Math.min(delay * 1.15, 3000);
          window.setTimeout(tick, delay);
        })
        .catch(function () { delay = Math.min(delay * 2, 10000); window.setTimeout(tick, delay); });
    }
    window.setTimeout(tick, 300);
  }

  /* --- the scenario builder ----------------------------------------------------------- */
  function builder() {
    var form = document.getElementById("builder");
    var regEl = document.getElementById("builder-registry");
    if (!form || !regEl) { return; }
    var registry = JSON.parse(regEl.textContent);

    function rolesOf(policy) {
      var p = registry.policies[policy];
      return p ? p.roles.map(function (r) { return r.name; }) : [""];
    }

    function syncPolicy(select) {
      var i = select.getAttribute("data-policy-select");
      var policy = select.value;
      form.querySelectorAll('.policy-options[data-system="' + i + '"]').forEach(function (div) {
        div.hidden = div.getAttribute("data-policy") !== policy;
      });
      var roles = rolesOf(policy);
      document.querySelectorAll("#system-" + i + " [data-role-select]").forEach(function (roleSel) {
        var current = roleSel.value;
        roleSel.innerHTML = "";
        roles.forEach(function (r) {
          var o = document.createElement("option");
          o.value = r;
          o.textContent = r || "(no role)";
          if (r === current) { o.selected = true; }
          roleSel.appendChild(o);
        });
      });
    }

    function syncRuntimes(row) {
      var dev = row.querySelector("[data-device-select]");
      var rt = row.querySelector("[data-runtime-select]");
      if (!dev || !rt) { return; }
      var kind = registry.deviceKinds[dev.value];
      rt.querySelectorAll("option[data-kind]").forEach(function (o) {
        var hide = !!kind && o.getAttribute("data-kind") !== kind;
        o.hidden = hide;
        o.disabled = hide && !o.selected;
      });
    }

    // how far the placement's figures can be trusted (measured / transferred / derived)
    function syncProvenance(row) {
      var dev = row.querySelector("[data-device-select]");
      var rt = row.querySelector("[data-runtime-select]");
      var out = row.querySelector("[data-provenance]");
      if (!dev || !rt || !out) { return; }
      var p = (registry.provenance || {})[dev.value + "|" + rt.value];
      out.textContent = "";
      out.hidden = !p;
      if (!p) { out.removeAttribute("data-calibration"); return; }
      out.setAttribute("data-calibration", p.label);
      var badge = document.createElement("span");
      badge.className = "badge calibration-" + p.label;
      badge.textContent = p.badge;
      out.appendChild(badge);
      out.appendChild(document.createTextNode(" " + p.note));
    }

    function syncPriceHint(row) {
      var dev = row.querySelector("[data-device-select]");
      var price = row.querySelector("[data-price-input]");
      if (!dev || !price) { return; }
      var hints = registry.priceHints || {};
      price.placeholder = hints[dev.value] || registry.priceHint || "";
      var power = row.querySelector("[data-power-input]");
      if (power) {
        var powerHints = registry.powerHints || {};
        power.placeholder = powerHints[dev.value] || registry.powerHint || "";
      }
    }

    function syncLength(fieldset) {
      var dist = fieldset.querySelector("[data-dist-select]").value;
      fieldset.querySelectorAll("[data-dists]").forEach(function (f) {
        f.hidden = f.getAttribute("data-dists").split(" ").indexOf(dist) < 0;
      });
    }

    form.querySelectorAll("[data-policy-select]").forEach(function (s) {
      s.addEventListener("change", function () { syncPolicy(s); });
    });
    form.querySelectorAll(".device-row").forEach(function (row) {
      syncRuntimes(row);
      var dev = row.querySelector("[data-device-select]");
      if (dev) {
        dev.addEventListener("change", function () {
          syncRuntimes(row); syncPriceHint(row); syncProvenance(row);
        });
      }
      var rtSel = row.querySelector("[data-runtime-select]");
      if (rtSel) {
        rtSel.addEventListener("change", function () { syncProvenance(row); });
      }
    });
    form.querySelectorAll("fieldset[data-length]").forEach(function (fs) {
      syncLength(fs);
      fs.querySelector("[data-dist-select]").addEventListener("change", function () { syncLength(fs); });
    });
    var source = document.getElementById("f-wl-source");
    var custom = document.getElementById("custom-workload");
    if (source && custom) {
      source.addEventListener("change", function () { custom.hidden = source.value !== "custom"; });
    }
    var firstError = form.querySelector(".has-error input, .has-error select, .has-error textarea");
    if (firstError) { firstError.focus({ preventScroll: false }); }
  }

  /* --- the workload editor: show the fields of the chosen distribution --------------- */
  function workloadForm() {
    var form = document.getElementById("workload-form");
    if (!form) { return; }
    var needs = { fixed: ["value"], uniform: ["low", "high"], lognormal: ["median", "sigma", "low", "high"], trace: [] };
    ["in", "out"].forEach(function (prefix) {
      var sel = form.querySelector('[name="' + prefix + '_dist"]');
      if (!sel) { return; }
      function sync() {
        ["value", "low", "high", "median", "sigma"].forEach(function (k) {
          var f = form.querySelector('[data-field="' + prefix + "_" + k + '"]');
          if (f) { f.hidden = (needs[sel.value] || []).indexOf(k) < 0 && !f.classList.contains("has-error"); }
        });
      }
      sel.addEventListener("change", sync);
      sync();
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    renderFigures(document);
    loadLazyFigures();
    loadCharts();
    followStatus();
    builder();
    workloadForm();
  });
})();
