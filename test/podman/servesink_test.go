package podman

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/kubetest"
	"github.com/sluiceflow/sluice/internal/podmantest"
)

// TestPodmanServeSinkSidecar runs one pod of two containers from sluice's
// image sharing /var/run/numaflow (an emptyDir), as a Numaflow sink vertex
// runs: "numa", `vertex run` of a MonoVertex whose http source the test
// posts to and whose sink is udsink, and "udsink", `vertex serve --role sink`
// of a vertex with an http sink to an endpoint of the test and a rate limit.
// Both configs come from a ConfigMap. Every message posted reaches the
// endpoint once; no epoch of the sidecar grants more than max, nor does any
// second at the endpoint see more; `podman pod stop` (SIGTERM) stops both
// containers with exit code 0.
func TestPodmanServeSinkSidecar(t *testing.T) {
	const (
		limit = 50
		total = 250 // messages posted
	)
	p := podmantest.New(t)
	image := p.Images(t)["sluice"]

	var mu sync.Mutex
	seen := map[string]int{}
	perSecond := map[int64]int{}
	ep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen[string(body)]++
		perSecond[time.Now().Unix()]++
		mu.Unlock()
	}))
	defer ep.Close()

	runPort, servePort, httpsPort, plainPort := freePort(t), freePort(t), freePort(t), freePort(t)
	outer := fmt.Sprintf(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: http-in
spec:
  limits:
    readBatchSize: 50
    readTimeout: 100ms
  source:
    http:
      ports: {https: %d, http: %d}
  sink:
    udsink:
      container:
        image: sluice:latest
`, httpsPort, plainPort)
	served := fmt.Sprintf(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: served-sink
spec:
  limits:
    readTimeout: 100ms
    rateLimit:
      max: %d
      min: %d
      rampUpDuration: 0s
  source:
    generator: {}
  sink:
    http:
      url: %s/ingest
`, limit, limit, ep.URL)

	name := "servesink-" + p.Tag()
	cm := name + "-config"
	mounts := []any{
		map[string]any{"name": "config", "mountPath": "/etc/sluice"},
		// The emptyDir is named after the pod, so that no other pod shares it.
		map[string]any{"name": name + "-uds", "mountPath": "/var/run/numaflow"},
	}
	pod := kubetest.Objects{
		{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": cm},
			"data": map[string]any{"outer.yaml": outer, "served.yaml": served}},
		{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": name},
			"spec": map[string]any{
				"hostNetwork": true,
				"containers": []any{
					map[string]any{"name": "udsink", "image": image, "volumeMounts": mounts,
						"args": []any{"serve", "--role", "sink", "-f", "/etc/sluice/served.yaml",
							"--addr", fmt.Sprintf("127.0.0.1:%d", servePort), "--log-level", "debug"}},
					map[string]any{"name": "numa", "image": image, "volumeMounts": mounts,
						"args": []any{"run", "-f", "/etc/sluice/outer.yaml",
							"--metrics-addr", fmt.Sprintf("127.0.0.1:%d", runPort),
							"--http-addr", fmt.Sprintf("127.0.0.1:%d", httpsPort),
							"--http-plain-addr", fmt.Sprintf("127.0.0.1:%d", plainPort)}},
				},
				"volumes": []any{
					map[string]any{"name": "config", "configMap": map[string]any{"name": cm}},
					map[string]any{"name": name + "-uds", "emptyDir": map[string]any{}},
				},
			}},
	}
	pl := p.Play(t, pod)
	sidecar, numa := name+"-udsink", name+"-numa"
	defer func() {
		if t.Failed() {
			for _, c := range []string{sidecar, numa} {
				_, stderr := p.Logs(t, c)
				logOnFailure(t, c, stderr)
			}
		}
	}()
	waitStatus(t, fmt.Sprintf("http://127.0.0.1:%d/readyz", servePort), http.StatusOK, readyTimeout)
	waitStatus(t, fmt.Sprintf("http://127.0.0.1:%d/readyz", runPort), http.StatusOK, readyTimeout)

	// Post the messages from 10 clients; each request is answered 204 once
	// its message is written, and one refused (429 with the queue full) is
	// posted again with its id.
	start := time.Now()
	url := fmt.Sprintf("http://127.0.0.1:%d/vertices/http-in", plainPort)
	var wg sync.WaitGroup
	errs := make(chan error, total)
	for c := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; i < total; i += 10 {
				errs <- post(url, strconv.Itoa(i))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(start)

	pl.Stop(t, stopTimeout)
	for _, c := range []string{sidecar, numa} {
		if code := p.Inspect(t, c, "{{.State.ExitCode}}"); code != "0" {
			t.Errorf("%s exited with code %s on SIGTERM", c, code)
		}
	}
	_, stderr := p.Logs(t, sidecar)
	full := checkEpochs(t, limit, epochs(t, stderr))

	mu.Lock()
	defer mu.Unlock()
	for i := range total {
		if n := seen[strconv.Itoa(i)]; n != 1 {
			t.Errorf("message %d reached the endpoint %d times; want once", i, n)
		}
	}
	if len(seen) != total {
		t.Errorf("%d distinct messages at the endpoint; want %d", len(seen), total)
	}
	secs := slices.Sorted(maps.Keys(perSecond))
	if len(secs) == 0 {
		t.Fatal("nothing reached the endpoint")
	}
	var counts []string
	for s := secs[0]; s <= secs[len(secs)-1]; s++ {
		counts = append(counts, strconv.Itoa(perSecond[s]))
		if perSecond[s] > limit {
			t.Errorf("second %d: %d messages at the endpoint; max %d", s, perSecond[s], limit)
		}
	}
	t.Logf("%d messages posted in %v; at the endpoint per second: %s (max %d); %d epochs granted max",
		total, took.Round(100*time.Millisecond), strings.Join(counts, " "), limit, full)
}

// post posts one message with its id as its body, again while the source
// answers 429, until it is answered 204 (within 60s).
func post(url, id string) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(id))
		if err != nil {
			return err
		}
		req.Header.Set("X-Numaflow-Id", "m"+id)
		resp, err := client.Do(req)
		code := 0
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			code = resp.StatusCode
		}
		switch {
		case code == http.StatusNoContent:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("message %s: %d %v after 60s", id, code, err)
		case code != http.StatusTooManyRequests && err == nil:
			return fmt.Errorf("message %s: answered %d", id, code)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
