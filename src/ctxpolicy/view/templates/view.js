/* ctxpolicy view: shows the messages of a call, or one message, from the embedded JSON.
   Plain script, no library: texts enter the page through textContent only. */
(function () {
  "use strict";
  var LIMIT = 20000; // characters: a longer message shows collapsed with its size
  var DATA = JSON.parse(document.getElementById("ctxpolicy-data").textContent);
  var panel = document.getElementById("panel");
  var panelBody = document.getElementById("panel-body");
  var panelTitle = document.getElementById("panel-title");

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function fmt(n) {
    return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  }

  function messageBox(run, code, position) {
    var m = DATA.runs[run].messages[code];
    var box = el("div", "message role-" + m[0]);
    var head = (position === undefined ? "" : "[" + position + "] ") + m[0] + " · " + fmt(m[2]) + " tokens · message " + code;
    box.appendChild(el("div", "message-head", head));
    var text = m[1];
    if (text.length > LIMIT) {
      var more = el("button", "expand", "collapsed: " + fmt(m[2]) + " tokens, " + fmt(text.length) + " characters; show");
      more.type = "button";
      more.addEventListener("click", function () {
        more.replaceWith(el("pre", "text", text));
      });
      box.appendChild(el("pre", "text", text.slice(0, 2000) + "\n…"));
      box.appendChild(more);
    } else {
      box.appendChild(el("pre", "text", text));
    }
    return box;
  }

  function showCall(run, index) {
    var prompt = DATA.runs[run].prompts[index];
    var call = DATA.runs[run].calls[index];
    panelTitle.textContent = "run " + run.toUpperCase() + ", call " + index + " (" + call.kind + ", step " + call.step + "): " + prompt.length + " messages sent";
    panelBody.replaceChildren();
    prompt.forEach(function (code, position) {
      panelBody.appendChild(messageBox(run, code, position));
    });
    panel.hidden = false;
    panel.scrollTop = 0;
  }

  function toggleMessage(button) {
    var next = button.nextElementSibling;
    if (next && next.classList.contains("inline-message")) {
      next.remove();
      return;
    }
    var holder = el("div", "inline-message");
    holder.appendChild(messageBox(button.dataset.run, Number(button.dataset.msg)));
    button.after(holder);
  }

  document.addEventListener("click", function (event) {
    var target = event.target.closest("button");
    if (!target) return;
    if (target.id === "panel-close") {
      panel.hidden = true;
    } else if (target.dataset.call !== undefined) {
      showCall(target.dataset.run, Number(target.dataset.call));
    } else if (target.dataset.msg !== undefined) {
      toggleMessage(target);
    }
  });

  // #messages-N (or #messages-b-N on a side-by-side page) opens call N's messages on load
  var wanted = /^#messages-(?:([ab])-)?(\d+)$/.exec(window.location.hash);
  if (wanted && DATA.runs[wanted[1] || "a"] && DATA.runs[wanted[1] || "a"].prompts[Number(wanted[2])]) {
    showCall(wanted[1] || "a", Number(wanted[2]));
  }

  // an index with its run pages inside (--embed-runs): a link opens its page from the data, so it
  // works where the index is shown alone (the Snakemake report), with no file beside it
  var pages = DATA.pages || {};
  function openPage(name) {
    document.open();
    document.write(pages[name]);
    document.close();
  }
  Array.prototype.forEach.call(document.querySelectorAll("a[data-page]"), function (link) {
    link.addEventListener("click", function (event) {
      if (pages[link.getAttribute("data-page")] === undefined) return;
      event.preventDefault();
      openPage(link.getAttribute("data-page"));
    });
  });
  var opened = /^#open=(.+)$/.exec(window.location.hash);
  if (opened && pages[decodeURIComponent(opened[1])] !== undefined) {
    openPage(decodeURIComponent(opened[1]));
    return;
  }

  var runs = Object.keys(DATA.runs);
  document.body.setAttribute("data-ready-ms", String(Math.round(performance.now()))); // since navigation start
  document.body.setAttribute("data-ready", String(runs.length));
})();
