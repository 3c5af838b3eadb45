package test

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	httpsAddrRE = regexp.MustCompile(`"msg":"http source listening".*"scheme":"https","addr":"([^"]+)"`)
	plainAddrRE = regexp.MustCompile(`"msg":"http source listening".*"scheme":"http","addr":"([^"]+)"`)
)

// sourceClient is how the tests post to an http source's self-signed
// HTTPS, as curl -k does.
func sourceClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
}

// sourceURL waits for p's http source to listen and returns the URL to post
// to vertex on: its HTTPS address's, or with re its plain HTTP address's.
func sourceURL(p *proc, re *regexp.Regexp, vertex string) string {
	var addr string
	p.waitFor(20*time.Second, "the http source address", func() bool {
		if m := re.FindStringSubmatch(p.stderr.String()); m != nil {
			addr = m[1]
		}
		return addr != ""
	})
	scheme := "https"
	if re == plainAddrRE {
		scheme = "http"
	}
	return scheme + "://" + addr + "/vertices/" + vertex
}

// TestHTTPSourceBackPressure posts over HTTPS more messages than a throttled
// vertex takes, each a body of 200 bytes beside a maxQueueBytes of 1024: the
// ones it takes are answered 204 after they reach the sink, each exactly
// once; the rest are turned away with 429 and Retry-After, never queued
// without bound.
func TestHTTPSourceBackPressure(t *testing.T) {
	cfg := writeConfig(t, `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: http-in
spec:
  limits:
    readBatchSize: 5
    rateLimit:
      max: 5
      min: 5
      rampUpDuration: 0s
  source:
    http:
      maxQueueBytes: 1024
      auth:
        token:
          file: `+writeSecret(t, "s3cret")+`
  sink:
    log: {}
`)
	p := start(t, "run", "-f", cfg, "--metrics-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0")
	url := sourceURL(p, httpsAddrRE, "http-in")

	client := sourceClient(20 * time.Second)
	post := func(body, token string) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("X-Numaflow-Keys", "k1,k2")
		return client.Do(req)
	}
	if resp, err := post("x", "wrong"); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong token: %v %v", resp, err)
	}

	const n = 40
	var mu sync.Mutex
	codes := map[int][]string{}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			// 200 bytes: at most five are held at once.
			body := fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, strings.Repeat("x", 200-len(fmt.Sprintf(`{"n":%d,"pad":""}`, i))))
			resp, err := post(body, "s3cret")
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusTooManyRequests {
				if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 {
					t.Errorf("429 with Retry-After %q", resp.Header.Get("Retry-After"))
				}
			}
			mu.Lock()
			codes[resp.StatusCode] = append(codes[resp.StatusCode], body)
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(codes[http.StatusNoContent]) == 0 || len(codes[http.StatusTooManyRequests]) == 0 ||
		len(codes[http.StatusNoContent])+len(codes[http.StatusTooManyRequests]) != n {
		t.Fatalf("answers by status: %v; want some 204, the rest 429", counts(codes))
	}
	p.waitFor(30*time.Second, "the accepted messages on stdout", func() bool {
		return len(p.lines) >= len(codes[http.StatusNoContent])
	})
	code, _ := p.stop(syscall.SIGTERM, 10*time.Second)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, p.stderrText())
	}
	written := map[string]int{}
	for _, l := range p.stdoutLines() {
		payload, _, _ := strings.Cut(strings.TrimPrefix(l, "Payload - "), " Keys - ")
		if !strings.Contains(l, " Keys - k1,k2 ") {
			t.Fatalf("keys lost: %q", l)
		}
		written[payload]++
	}
	for _, body := range codes[http.StatusNoContent] {
		if written[body] != 1 {
			t.Errorf("%s answered 204 but written %d times", body, written[body])
		}
	}
	for _, body := range codes[http.StatusTooManyRequests] {
		if written[body] != 0 {
			t.Errorf("%s answered 429 but written", body)
		}
	}
}

func counts(m map[int][]string) map[int]int {
	out := map[int]int{}
	for k, v := range m {
		out[k] = len(v)
	}
	return out
}

// TestHTTPSourceBatchOfOne runs a pipeline whose limits read one message at a
// time, as Numaflow's example 13 does, and posts 400 messages over HTTPS from
// 8 clients at once, each waiting for its answer before its next post: all
// 400 are accepted (204), since the http source's queue is its own and not
// readBatchSize, and each reaches the sink exactly once.
func TestHTTPSourceBatchOfOne(t *testing.T) {
	const senders, each = 8, 50
	cfg := writeConfig(t, httpToLog("batch-of-one", "  limits:\n    readBatchSize: 1\n"))
	p := start(t, "run", "-f", cfg, "--metrics-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0")
	url := sourceURL(p, httpsAddrRE, "in")
	client := sourceClient(30 * time.Second)
	codes := make([]map[int]int, senders)
	began := time.Now()
	var wg sync.WaitGroup
	for i := range senders {
		codes[i] = map[int]int{}
		wg.Go(func() {
			for j := range each {
				resp, err := client.Post(url, "text/plain", strings.NewReader(fmt.Sprintf("m-%d-%d", i, j)))
				if err != nil {
					t.Errorf("sender %d, post %d: %v", i, j, err)
					return
				}
				resp.Body.Close()
				codes[i][resp.StatusCode]++
			}
		})
	}
	wg.Wait()
	took := time.Since(began)
	total := map[int]int{}
	for _, c := range codes {
		for code, n := range c {
			total[code] += n
		}
	}
	t.Logf("%d posts from %d senders in %v (%.0f/s): answers by status %v", senders*each, senders, took.Round(time.Millisecond),
		float64(senders*each)/took.Seconds(), total)
	if total[http.StatusNoContent] != senders*each {
		t.Fatalf("answers by status %v; want all %d answered 204", total, senders*each)
	}
	p.waitFor(30*time.Second, "400 messages on stdout", func() bool { return len(p.lines) >= senders*each })
	if code, _ := p.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, p.stderrText())
	}
	written := map[string]int{}
	for _, l := range p.stdoutLines() {
		payload, _, _ := strings.Cut(strings.TrimPrefix(l, "Payload - "), " Keys - ")
		written[payload]++
	}
	for i := range senders {
		for j := range each {
			if n := written[fmt.Sprintf("m-%d-%d", i, j)]; n != 1 {
				t.Errorf("m-%d-%d written %d times, want once", i, j, n)
			}
		}
	}
	if len(written) != senders*each {
		t.Errorf("%d payloads written, want %d", len(written), senders*each)
	}
}

// TestHTTPSourceCurl runs the commands of Numaflow's http source page with
// curl: `curl -kq -X POST -d "hello world" https://localhost:8443/vertices/in`
// against `vertex run` of a pipeline whose source is `http: {}`, on the
// default port, and, with ports.http, the plain HTTP post. It is skipped
// without curl, and the first part when port 8443 is taken.
func TestHTTPSourceCurl(t *testing.T) {
	curlBin, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed")
	}
	curl := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(curlBin, append([]string{"-sS", "--max-time", "20", "-w", "%{http_code}"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("curl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	t.Run("https on 8443", func(t *testing.T) {
		if ln, err := net.Listen("tcp", ":8443"); err != nil {
			t.Skipf("port 8443 is taken: %v", err)
		} else {
			ln.Close()
		}
		cfg := writeConfig(t, httpToLog("http-pipeline", ""))
		p := start(t, "run", "-f", cfg, "--metrics-addr", "127.0.0.1:0")
		if url := sourceURL(p, httpsAddrRE, "in"); !strings.HasSuffix(url, ":8443/vertices/in") {
			t.Fatalf("the source serves %s; want port 8443", url)
		}
		if got := curl("-kq", "-X", "POST", "-d", "hello world", "https://localhost:8443/vertices/in"); got != "204" {
			t.Fatalf("curl -kq -X POST: %q; want 204", got)
		}
		if got := curl("-k", "-H", "x-numaflow-keys: user123,region-us-west", "https://localhost:8443/vertices/in", "-d", `{"data": "sample"}`); got != "204" {
			t.Fatalf("curl -k with keys: %q; want 204", got)
		}
		if got := curl("-k", "https://localhost:8443/health"); got != "204" {
			t.Fatalf("curl -k /health: %q; want 204", got)
		}
		// Without -k, curl does not trust the self-signed certificate.
		if out, err := exec.Command(curlBin, "-sS", "--max-time", "20", "-d", "x", "https://localhost:8443/vertices/in").CombinedOutput(); err == nil ||
			!strings.Contains(string(out), "self-signed certificate") {
			t.Errorf("curl without -k: %v, %s; want a failure naming the self-signed certificate", err, out)
		}
		p.waitFor(20*time.Second, "two messages on stdout", func() bool { return len(p.lines) >= 2 })
		if code, _ := p.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", code, p.stderrText())
		}
		lines := p.stdoutLines()
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "Payload - hello world Keys -  ") ||
			!strings.HasPrefix(lines[1], `Payload - {"data": "sample"} Keys - user123,region-us-west `) {
			t.Fatalf("sink lines %q", lines)
		}
	})
	t.Run("plain http with ports.http", func(t *testing.T) {
		cfg := writeConfig(t, `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: plain
spec:
  source:
    http:
      ports:
        http: 8090
  sink:
    log: {}
`)
		p := start(t, "run", "-f", cfg, "--metrics-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--http-plain-addr", "127.0.0.1:0")
		secure, plain := sourceURL(p, httpsAddrRE, "plain"), sourceURL(p, plainAddrRE, "plain")
		if got := curl("-X", "POST", "-d", "hello world", plain); got != "204" {
			t.Fatalf("curl over plain HTTP: %q; want 204", got)
		}
		if got := curl("-kq", "-X", "POST", "-d", "over https", secure); got != "204" {
			t.Fatalf("curl -k over HTTPS: %q; want 204", got)
		}
		p.waitFor(20*time.Second, "two messages on stdout", func() bool { return len(p.lines) >= 2 })
		if code, _ := p.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", code, p.stderrText())
		}
	})
}

// httpToLog is the pipeline name of an http source, in, with Numaflow's
// defaults, and a log sink, out, with the pipeline's limits (YAML of
// spec's, indented two spaces).
func httpToLog(name, limits string) string {
	return `apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: ` + name + `
spec:
` + limits + `  vertices:
    - name: in
      source:
        http: {}
    - name: out
      sink:
        log: {}
  edges:
    - from: in
      to: out
`
}
