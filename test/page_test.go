package test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pagePipeline is a pipeline of three vertices in one process: in, without
// a rate limit; cat, with 20 a second and 2000 bytes a second split
// between two replicas of a fixed count (this process is replica 0); and
// out, whose Redis cannot be reached.
const pagePipeline = `apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: page
spec:
  vertices:
    - name: in
      source:
        generator:
          rpu: 100
          duration: 1s
    - name: cat
      udf:
        builtin:
          name: cat
      limits:
        rateLimit:
          max: 20
          min: 20
          rampUpDuration: 0s
          bytes: {max: 2000, min: 2000}
          store:
            replicaCountStore:
              replicas: 2
    - name: out
      sink:
        blackhole: {}
      limits:
        rateLimit:
          max: 50
          min: 50
          rampUpDuration: 0s
          onStoreFailure: pause
          store:
            redisStore:
              mode: single
              url: redis://127.0.0.1:1
  edges:
    - from: in
      to: cat
    - from: cat
      to: out
`

// debianChromium is Debian's Chromium binary, which its /usr/bin/chromium
// wrapper script starts. The test starts it directly, with the wrapper's
// flags that matter to a headless run (headlessFlags): the script's other
// work (sourcing /etc/chromium.d, checking /dev/shm with a test that
// breaks, and prints "[: ...: unexpected operator", when findmnt reports
// /dev/shm twice) is nothing a headless run needs.
const debianChromium = "/usr/lib/chromium/chromium"

// chromium returns the path of a headless-capable Chromium, or skips the
// test.
func chromium(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(debianChromium); err == nil {
		return debianChromium
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("chromium not installed: `make deps` installs Debian's chromium, which the page test drives headless")
	return ""
}

// headlessFlags are Chromium's flags for a page test: headless, as root,
// with shared memory in a temp file rather than /dev/shm (which may be
// small in a container), and without any of the browser's own traffic off
// this machine (background updates, pings, sync, extensions), as Debian's
// wrapper would add some of them.
var headlessFlags = []string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
	"--disable-dev-shm-usage", "--disable-background-networking", "--disable-component-update",
	"--disable-sync", "--disable-extensions", "--disable-default-apps", "--no-default-browser-check",
	"--no-pings", "--media-router=0", "--mute-audio"}

// headlessTimeout bounds one run of Chromium. It takes a few seconds on an
// idle machine, and many more to start its processes on two cores that the
// rest of the suite keeps busy.
const headlessTimeout = 2 * time.Minute

// headless runs Chromium on url with args (--dump-dom or --screenshot),
// giving the page's script 3 seconds of virtual time, and returns its
// stdout. A failure says how Chromium ended, after how long, the machine's
// load, and what Chromium wrote on stderr.
func headless(t *testing.T, bin, url string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), headlessTimeout)
	defer cancel()
	args = append(slices.Concat(headlessFlags, []string{"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=3000"}), args...)
	cmd := exec.CommandContext(ctx, bin, append(args, url)...)
	// Chromium's own processes (zygote, renderer, GPU) are in its process
	// group: a timeout kills them all, and the wait for its output ends
	// soon after, even if one of them still holds stdout.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	began := time.Now()
	err := cmd.Run()
	took := time.Since(began)
	if err != nil {
		why := ""
		if ctx.Err() != nil {
			why = fmt.Sprintf(", killed at the timeout of %v", headlessTimeout)
		}
		load, _ := os.ReadFile("/proc/loadavg")
		t.Fatalf("%s %s: %v after %v%s (load average %s); stderr:\n%s",
			bin, strings.Join(args, " "), err, took.Round(time.Millisecond), why, strings.TrimSpace(string(load)), stderr.String())
	}
	t.Logf("chromium %s took %v", args[len(args)-1], took.Round(time.Millisecond))
	return stdout.String()
}

var panelRE = regexp.MustCompile(`<section class="vertex"[^>]*>`)

// panels returns the attributes of each vertex panel of dom, by vertex, and
// the vertices in the order the page lays them out.
func panels(dom string) (map[string]map[string]string, []string) {
	attrRE := regexp.MustCompile(`([a-z-]+)="([^"]*)"`)
	out := map[string]map[string]string{}
	var order []string
	for _, tag := range panelRE.FindAllString(dom, -1) {
		attrs := map[string]string{}
		for _, m := range attrRE.FindAllStringSubmatch(tag, -1) {
			attrs[m[1]] = m[2]
		}
		out[attrs["data-vertex"]] = attrs
		order = append(order, attrs["data-vertex"])
	}
	return out, order
}

// TestPage runs a pipeline and opens its status page in headless Chromium:
// one panel per vertex, left to right as the graph goes, cat's pool of 20
// split between two replicas and rate limited, with a chart of its bytes, in's rate limit off (with
// what it reads each second) and out's store unreachable, each said on the
// page. With
// SLUICE_PAGE_SCREENSHOT=FILE it also saves the page as a PNG in FILE
// (docs/page.png is made so, from test/: SLUICE_PAGE_SCREENSHOT=../docs/page.png).
func TestPage(t *testing.T) {
	t.Parallel()
	bin := chromium(t)
	p := start(t, "run", "-f", writeConfig(t, pagePipeline), "--metrics-addr", "127.0.0.1:0")
	url := "http://" + p.metricsAddr() + "/"

	// cat has ended two epochs: the page has something to draw. It takes
	// two seconds on an idle machine; the bound is for a busy one.
	const epochsTimeout = 30 * time.Second
	deadline := time.Now().Add(epochsTimeout)
	for ; ; time.Sleep(200 * time.Millisecond) {
		var page struct {
			Vertices []struct {
				Vertex string            `json:"vertex"`
				Epochs []json.RawMessage `json:"epochs"`
			} `json:"vertices"`
		}
		if code, body := httpGet(t, url+"status/live"); code == 200 && json.Unmarshal(body, &page) == nil &&
			len(page.Vertices) == 3 && len(page.Vertices[1].Epochs) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cat ended fewer than 2 epochs in %v; stderr:\n%s", epochsTimeout, p.stderrText())
		}
	}

	dom := headless(t, bin, url, "--dump-dom")
	if !strings.Contains(dom, `data-state="ok"`) || !strings.Contains(dom, `data-vertices="3"`) {
		t.Fatalf("the page did not draw 3 vertices:\n%s", dom)
	}
	got, order := panels(dom)
	if strings.Join(order, " ") != "in cat out" {
		t.Errorf("panels %v; want in, cat, out, left to right", order)
	}
	want := map[string]map[string]string{
		"in":  {"data-limit": "off"},
		"cat": {"data-limit": "on", "data-pool": "20", "data-replicas": "2", "data-top-reason": "rate_limited", "data-store": "up", "data-bytes-pool": "2000"},
		"out": {"data-limit": "on", "data-store": "down"},
	}
	for v, attrs := range want {
		for k, w := range attrs {
			if g := got[v][k]; g != w {
				t.Errorf("%s's panel: %s=%q, want %q", v, k, g, w)
			}
		}
	}
	for _, text := range []string{"Store unreachable for out", "Rate limit off (no rateLimit block) for in", "rank 1",
		"Bytes: pool and grants per epoch", "2000 bytes a second, this replica's share 1000"} {
		if !strings.Contains(dom, text) {
			t.Errorf("the page does not say %q", text)
		}
	}
	if n := strings.Count(dom, `<svg class="chart"`); n != 9 {
		t.Errorf("%d charts drawn, want 4 for cat (its bytes too), 3 for out, 2 for in", n)
	}
	if got["in"]["data-epochs"] == "0" || got["in"]["data-epochs"] == "" {
		t.Errorf("in's panel has no seconds of what it read and wrote")
	}

	if path := os.Getenv("SLUICE_PAGE_SCREENSHOT"); path != "" {
		abs, err := filepath.Abs(path)
		if err != nil {
			t.Fatal(err)
		}
		headless(t, bin, url, "--screenshot="+abs, "--window-size=1280,900", "--hide-scrollbars")
		t.Logf("screenshot in %s", abs)
	}
}

// TestPageBench checks `vertex bench --variants live`: the page variant's
// rate, its ratio to on and the answers of /status/live it read, at least
// one a run; an unknown variant is a usage error that lists live.
func TestPageBench(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(vertexBin, "bench", "-f", "../config/examples/bench.yaml", "--variants", "live", "--duration", "400ms", "--runs", "2")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %s", err, stderr.String())
	}
	out := stdout.String()
	m := regexp.MustCompile(`(?m)^live/on ratio: [0-9]+\.[0-9]{3} \(run by run: [0-9]+\.[0-9]{3}\), ([0-9]+) answers of /status/live read$`).FindStringSubmatch(out)
	if !regexp.MustCompile(`(?m)^live: +[0-9]+ msg/s`).MatchString(out) || m == nil || m[1] == "0" || m[1] == "1" {
		t.Fatalf("bench --variants live output:\n%s", out)
	}
	bad := exec.Command(vertexBin, "bench", "-f", "../config/examples/bench.yaml", "--variants", "page")
	msg, err := bad.CombinedOutput()
	if code := bad.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(msg), `"page" is not a variant; want bytes, cost, group or live`) {
		t.Fatalf("--variants page: exit %d (%v), %q", code, err, msg)
	}
}
