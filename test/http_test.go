package test

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var httpAddrRE = regexp.MustCompile(`"msg":"http source listening".*"addr":"([^"]+)"`)

// TestHTTPSourceBackPressure posts more messages than a throttled vertex takes:
// the ones it takes are answered 204 after they reach the sink, each exactly
// once; the rest are turned away with 429 and Retry-After, never queued without
// bound.
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
      auth:
        token:
          file: `+writeSecret(t, "s3cret")+`
  sink:
    log: {}
`)
	p := start(t, "run", "-f", cfg, "--metrics-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0")
	var addr string
	p.waitFor(20*time.Second, "the http source address", func() bool {
		if m := httpAddrRE.FindStringSubmatch(p.stderr.String()); m != nil {
			addr = m[1]
		}
		return addr != ""
	})
	url := "http://" + addr + "/vertices/http-in"

	post := func(body, token string) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("X-Numaflow-Keys", "k1,k2")
		return (&http.Client{Timeout: 20 * time.Second}).Do(req)
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
			body := fmt.Sprintf(`{"n":%d}`, i)
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
