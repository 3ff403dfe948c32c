// Progressive enhancement: every page works without this file.
// - A running workflow's page follows it live (server-sent events) and redraws its changing part.
// - The Sources page refreshes its jobs table while a job runs.
"use strict";

function replaceFrom(url, element) {
  return fetch(url, { credentials: "same-origin" })
    .then(function (answer) { return answer.ok ? answer.text() : null; })
    .then(function (html) { if (html !== null) { element.innerHTML = html; } });
}

function followWorkflow(element) {
  var followUrl = element.getAttribute("data-follow");
  var liveUrl = element.getAttribute("data-live");
  if (!followUrl || !window.EventSource) { return; }
  var source = new EventSource(followUrl);
  var pending = false;
  function redraw() {
    if (pending) { return; }
    pending = true;
    replaceFrom(liveUrl, element).finally(function () { pending = false; });
  }
  source.addEventListener("change", redraw);
  source.addEventListener("end", function () { source.close(); replaceFrom(liveUrl, element); });
  source.onerror = function () { source.close(); setTimeout(function () { replaceFrom(liveUrl, element); }, 1000); };
}

function pollJobs(element) {
  var url = element.getAttribute("data-poll");
  if (!url) { return; }
  var timer = setInterval(function () {
    replaceFrom(url, element).then(function () {
      if (!element.querySelector(".s-running, .s-queued")) { clearInterval(timer); }
    });
  }, 1000);
}

document.addEventListener("DOMContentLoaded", function () {
  var live = document.getElementById("live");
  if (live) { followWorkflow(live); }
  var jobs = document.getElementById("jobs");
  if (jobs) { pollJobs(jobs); }
});
