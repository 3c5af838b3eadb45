// Package podman holds end-to-end tests of sluice's container images and of
// the MonoVertex manifests under deploy/, run for real with podman: images
// built from this tree, pods from the rendered kustomizations.
package podman

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluiceflow/sluice/internal/kubetest"
	"github.com/sluiceflow/sluice/internal/podmantest"
	"github.com/sluiceflow/sluice/internal/redistest"
)

func TestMain(m *testing.M) { os.Exit(podmantest.Main(m)) }

const (
	deployment   = "rate-limited"   // the MonoVertex's Deployment in deploy/
	readyTimeout = 60 * time.Second // from kube play to /readyz answering 200
	measureFor   = 6 * time.Second  // of throttled flow measured
	stopTimeout  = 20 * time.Second // SIGTERM, then SIGKILL
	replicaKey   = "numaflow.numaproj.io/replica"
)

// TestPodmanImages checks the images: vertex version prints the version
// stamped at build time, under both of its names; the images run as user
// 65532, carry their OCI labels and entrypoints, and hold what a static binary
// needs (CA certificates, the user in /etc/passwd, /tmp) and a
// /var/run/numaflow the user owns.
func TestPodmanImages(t *testing.T) {
	p := podmantest.New(t)
	imgs := p.Images(t, "cat")
	for _, entrypoint := range []string{"/bin/vertex", "/bin/numaflow-rs"} {
		out := p.Run(t, "run", "--rm", "--network", "host", "--entrypoint", entrypoint, imgs["sluice"], "version")
		if got := strings.TrimSpace(out); got != p.Tag() {
			t.Errorf("%s version printed %q; want %q", entrypoint, got, p.Tag())
		}
	}
	entrypoints := map[string]string{"sluice": "/bin/vertex", "sluice-example-cat": "/bin/example"}
	for name, img := range map[string]string{"sluice": imgs["sluice"], "sluice-example-cat": imgs["cat"]} {
		var info []struct {
			Size   int64
			Config struct {
				User       string
				Entrypoint []string
				Labels     map[string]string
			}
		}
		if err := json.Unmarshal([]byte(p.Run(t, "image", "inspect", img)), &info); err != nil || len(info) != 1 {
			t.Fatalf("podman image inspect %s: %v", img, err)
		}
		c := info[0].Config
		if c.User != "65532:65532" {
			t.Errorf("%s runs as %q; want 65532:65532", name, c.User)
		}
		for k, want := range map[string]string{
			"org.opencontainers.image.title":   name,
			"org.opencontainers.image.version": p.Tag(),
			"org.opencontainers.image.source":  "https://github.com/sluiceflow/sluice",
		} {
			if c.Labels[k] != want {
				t.Errorf("%s: label %s is %q; want %q", name, k, c.Labels[k], want)
			}
		}
		if len(c.Labels["org.opencontainers.image.revision"]) == 0 {
			t.Errorf("%s has no revision label", name)
		}
		if !slices.Equal(c.Entrypoint, []string{entrypoints[name]}) {
			t.Errorf("%s's entrypoint is %v; want [%s]", name, c.Entrypoint, entrypoints[name])
		}
		checkFiles(t, p, img)
		t.Logf("%s: %.1f MB, entrypoint %v", name, float64(info[0].Size)/1e6, c.Entrypoint)
	}
}

// checkFiles checks an image's files, mounted on the host.
func checkFiles(t *testing.T, p *podmantest.Podman, img string) {
	t.Helper()
	root := strings.TrimSpace(p.Run(t, "image", "mount", img))
	defer p.Run(t, "image", "unmount", img)
	if fi, err := os.Stat(root + "/etc/ssl/certs/ca-certificates.crt"); err != nil || fi.Size() == 0 {
		t.Errorf("%s: no CA certificates: %v", img, err)
	}
	if b, err := os.ReadFile(root + "/etc/passwd"); err != nil || !strings.Contains(string(b), ":65532:65532:") {
		t.Errorf("%s: /etc/passwd has no user 65532: %q %v", img, b, err)
	}
	if fi, err := os.Stat(root + "/tmp"); err != nil || fi.Mode()&(os.ModeSticky|os.ModePerm) != os.ModeSticky|0o777 {
		t.Errorf("%s: /tmp is %v (%v); want drwxrwxrwt", img, fi.Mode(), err)
	}
	if fi, err := os.Stat(root + "/var/run/numaflow"); err != nil {
		t.Errorf("%s: no /var/run/numaflow: %v", img, err)
	} else if st, ok := fi.Sys().(*syscall.Stat_t); !fi.IsDir() || !ok || st.Uid != 65532 {
		t.Errorf("%s: /var/run/numaflow is not a directory of user 65532", img)
	}
}

// monoVertexPod renders the kustomization dir and turns its MonoVertex
// Deployment into a pod for podman: replica replica, /metrics on port,
// the images this process built, debug logs (for the epoch log), and the
// MonoVertex changed by edit.
func monoVertexPod(t *testing.T, p *podmantest.Podman, objs kubetest.Objects, name string, replica, port int, edit func(mv map[string]any)) kubetest.Objects {
	t.Helper()
	imgs := p.Images(t, "cat", "simplesource")
	pod := podmantest.ForPodman(t, objs, deployment, podmantest.PodOptions{
		Name:        name,
		Annotations: map[string]string{replicaKey: strconv.Itoa(replica)},
		Images: map[string]string{"sluice": imgs["sluice"], "sluice-example-cat": imgs["cat"],
			"sluice-example-simplesource": imgs["simplesource"]},
	})
	numa := podmantest.Container(t, pod[len(pod)-1], "numa")
	args := []any{}
	for i, a := range numa["args"].([]any) {
		if i > 0 && numa["args"].([]any)[i-1] == "--metrics-addr" {
			continue
		}
		if a != "--metrics-addr" {
			args = append(args, a)
		}
	}
	numa["args"] = append(args, "--metrics-addr", fmt.Sprintf("127.0.0.1:%d", port), "--log-level", "debug")
	for _, probe := range []string{"readinessProbe", "livenessProbe"} {
		if get := kubetest.Map(numa, probe, "httpGet"); get != nil {
			get["port"] = port
		}
	}
	for _, o := range pod {
		data := kubetest.Map(o, "data")
		src, ok := data["monovertex.yaml"].(string)
		if o.Kind() != "ConfigMap" || !ok {
			continue
		}
		var mv map[string]any
		if err := yaml.Unmarshal([]byte(src), &mv); err != nil {
			t.Fatalf("the MonoVertex of ConfigMap %s: %v", o.Name(), err)
		}
		edit(mv)
		b, err := yaml.Marshal(mv)
		if err != nil {
			t.Fatal(err)
		}
		data["monovertex.yaml"] = string(b)
	}
	return pod
}

// rateLimit returns the MonoVertex's rateLimit block, to change.
func rateLimit(mv map[string]any) map[string]any {
	return kubetest.Map(mv, "spec", "limits", "rateLimit")
}

// atMaxFromTheStart makes a MonoVertex start at its max (min = max, no ramp),
// so that every second measured is at the limit, and returns max.
func atMaxFromTheStart(t *testing.T, mv map[string]any) int {
	rl := rateLimit(mv)
	limit, ok := rl["max"].(int)
	if !ok || limit <= 0 {
		t.Fatalf("the MonoVertex's rateLimit.max is %v", rl["max"])
	}
	rl["min"], rl["rampUpDuration"] = limit, "0s"
	return limit
}

// TestPodmanMonoVertex runs deploy/base/monovertex as a pod with podman: the
// sluice container, the simplesource and cat examples as sidecars (podman 4.3
// runs initContainers to completion, so they run as containers here),
// sharing /var/run/numaflow. /healthz and /readyz answer; messages flow at
// the limit, which no epoch exceeds; every message the source made reaches
// the log sink once, through cat; SIGTERM stops the vertex with exit code 0.
func TestPodmanMonoVertex(t *testing.T) {
	p := podmantest.New(t)
	start := time.Now()
	p.Images(t, "cat", "simplesource")
	built := time.Since(start)
	port := freePort(t)
	limit := 0
	objs := kubetest.Render(t, "../../deploy/base/monovertex")
	pod := monoVertexPod(t, p, objs, "mvtx-"+p.Tag(), 0, port, func(mv map[string]any) { limit = atMaxFromTheStart(t, mv) })
	played := time.Now()
	pl := p.Play(t, pod)
	addr := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitStatus(t, addr+"/readyz", http.StatusOK, readyTimeout)
	ready := time.Since(played)
	if code, body := get(t, addr+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d %s", code, body)
	}

	rate := writeRate(t, []string{addr})
	pl.Stop(t, stopTimeout)
	numa := "mvtx-" + p.Tag() + "-numa"
	if code := p.Inspect(t, numa, "{{.State.ExitCode}}"); code != "0" {
		_, stderr := p.Logs(t, numa)
		t.Errorf("the vertex exited with code %s on SIGTERM; stderr:\n%s", code, tail(stderr, 20))
	}
	stdout, stderr := p.Logs(t, numa)
	defer logOnFailure(t, numa, stderr)
	full := checkEpochs(t, limit, epochs(t, stderr))
	if full < 4 {
		t.Errorf("%d epochs granted the whole limit; want at least 4 in %v", full, measureFor)
	}
	if rate < 0.9*float64(limit) || rate > float64(limit) {
		t.Errorf("%.1f messages a second written; want the limit, %d", rate, limit)
	}
	n := checkSequence(t, stdout)
	t.Logf("images ready %v after start, pod ready %v after kube play; %.1f msg/s written (limit %d), %d full epochs, %d messages",
		built.Round(100*time.Millisecond), ready.Round(100*time.Millisecond), rate, limit, full, n)
}

// TestPodmanReplicasShareThroughRedis runs deploy/overlays/monovertex-redis as
// two pods, replicas 0 and 1 of the MonoVertex, sharing its limit through a
// Redis the test starts on loopback with the password of the overlay's
// Secret, which the vertices read from the file the Secret mounts (a
// ConfigMap here: podman 4.3 does not mount Secrets). Together they never
// exceed the limit in an epoch, and with both agreed they reach it.
func TestPodmanReplicasShareThroughRedis(t *testing.T) {
	p := podmantest.New(t)
	objs := kubetest.Render(t, "../../deploy/overlays/monovertex-redis")
	var secret kubetest.Secret
	for _, o := range objs.OfKind("Secret") {
		o.Decode(t, &secret)
	}
	password, ok := secret.Value(t, "password")
	if !ok {
		t.Fatal("the overlay renders no Secret with a password")
	}
	srv := redistest.Start(t, redistest.Options{Password: password})
	limit := 0
	var pods kubetest.Objects
	var addrs, names []string
	for replica := range 2 {
		port := freePort(t)
		name := fmt.Sprintf("mvtx-%s-%d", p.Tag(), replica)
		pods = append(pods, monoVertexPod(t, p, objs, name, replica, port, func(mv map[string]any) {
			limit = atMaxFromTheStart(t, mv)
			kubetest.Map(rateLimit(mv), "store", "redisStore")["url"] = "redis://" + srv.Addr
		})...)
		addrs = append(addrs, fmt.Sprintf("http://127.0.0.1:%d", port))
		names = append(names, name+"-numa")
	}
	played := time.Now()
	pl := p.Play(t, pods)
	for _, addr := range addrs {
		waitStatus(t, addr+"/readyz", http.StatusOK, readyTimeout)
	}
	waitReplicas(t, addrs, 2, readyTimeout)
	ready := time.Since(played)
	for i, a := range addrs {
		// The replica's index comes from the pod's annotation (NUMAFLOW_REPLICA).
		var st struct{ Replica int }
		if _, body := get(t, a+"/status"); json.Unmarshal([]byte(body), &st) != nil || st.Replica != i {
			t.Errorf("%s/status: %s; want replica %d", a, body, i)
		}
	}
	rate := writeRate(t, addrs)
	pl.Stop(t, stopTimeout)

	granted := map[int64]int64{}
	eligible := map[int64]int{} // replicas eligible per epoch, of the 2
	for _, name := range names {
		if code := p.Inspect(t, name, "{{.State.ExitCode}}"); code != "0" {
			t.Errorf("%s exited with code %s on SIGTERM", name, code)
		}
		stdout, stderr := p.Logs(t, name)
		defer logOnFailure(t, name, stderr)
		checkSequence(t, stdout)
		for e, l := range epochs(t, stderr) {
			granted[e] += l.Granted
			if l.Eligible && l.Replicas == 2 {
				eligible[e]++
			}
		}
	}
	full := 0
	for _, e := range slices.Sorted(maps.Keys(granted)) {
		if granted[e] > int64(limit) {
			t.Errorf("epoch %d: the replicas granted %d together; max %d", e, granted[e], limit)
		}
		if eligible[e] == 2 && granted[e] == int64(limit) {
			full++
		}
	}
	if full < 4 {
		t.Errorf("%d epochs with both replicas eligible granted the whole limit; want at least 4 (granted per epoch: %v, eligible: %v)", full, granted, eligible)
	}
	if rate < 0.9*float64(limit) || rate > float64(limit) {
		t.Errorf("%.1f messages a second written by both; want the limit, %d", rate, limit)
	}
	t.Logf("pods ready and pooled %v after kube play; %.1f msg/s written by both (limit %d), %d full epochs",
		ready.Round(100*time.Millisecond), rate, limit, full)
}

// logOnFailure logs a container's log lines above debug when the test failed.
func logOnFailure(t *testing.T, container, stderr string) {
	if !t.Failed() {
		return
	}
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if !strings.Contains(l, `"level":"debug"`) {
			t.Logf("%s: %s", container, l)
		}
	}
}

// epochLog is a replica's own account of one epoch (its debug log "epoch").
type epochLog struct {
	Epoch    int64
	Granted  int64
	Share    int64
	Replicas int `json:"poolSize"`
	Eligible bool
}

// epochs returns a replica's per-epoch accounting from its debug log.
func epochs(t *testing.T, stderr string) map[int64]epochLog {
	t.Helper()
	out := map[int64]epochLog{}
	for _, line := range strings.Split(stderr, "\n") {
		if !strings.Contains(line, `"msg":"epoch"`) {
			continue
		}
		var e epochLog
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("epoch log %q: %v", line, err)
		}
		out[e.Epoch] = e
	}
	if len(out) == 0 {
		t.Fatalf("no epoch in the vertex's debug log:\n%s", tail(stderr, 20))
	}
	return out
}

// checkEpochs checks that no epoch granted more than max, and returns how many
// granted max exactly.
func checkEpochs(t *testing.T, limit int, eps map[int64]epochLog) (full int) {
	t.Helper()
	for _, e := range slices.Sorted(maps.Keys(eps)) {
		switch g := eps[e].Granted; {
		case g > int64(limit):
			t.Errorf("epoch %d granted %d; max %d", e, g, limit)
		case g == int64(limit):
			full++
		}
	}
	return full
}

var payloadLine = regexp.MustCompile(`^Payload - (\d+) Keys - `)

// checkSequence checks that the log sink printed the source's messages 0, 1,
// 2, ... each once, and returns how many.
func checkSequence(t *testing.T, stdout string) int {
	t.Helper()
	seen := map[int]bool{}
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		m := payloadLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("not a log-sink line: %q", line)
		}
		n, _ := strconv.Atoi(m[1])
		if seen[n] {
			t.Errorf("message %d written twice", n)
		}
		seen[n] = true
	}
	for n := range len(seen) {
		if !seen[n] {
			t.Fatalf("message %d missing among %d written (%s)", n, len(seen), ranges(seen))
		}
	}
	if len(seen) == 0 {
		t.Fatal("the log sink printed nothing")
	}
	return len(seen)
}

// ranges lists the numbers seen as ranges: 0-74, 100-249.
func ranges(seen map[int]bool) string {
	var out []string
	nums := slices.Sorted(maps.Keys(seen))
	for i := 0; i < len(nums); {
		j := i
		for j+1 < len(nums) && nums[j+1] == nums[j]+1 {
			j++
		}
		out = append(out, fmt.Sprintf("%d-%d", nums[i], nums[j]))
		i = j + 1
	}
	return strings.Join(out, ", ")
}

// writeRate measures, over measureFor, the messages the vertices at addrs
// write per second together (sluice_forward_write_total).
func writeRate(t *testing.T, addrs []string) float64 {
	t.Helper()
	return perEpoch(func() (sum float64) {
		for _, a := range addrs {
			sum += counter(t, a, "sluice_forward_write_total")
		}
		return sum
	})
}

// perEpoch reads a count in the middle of a second, after the epoch's grant
// was used, and again measureFor later, and returns its rise per epoch: per
// epoch that began between the first reading's request and the second's
// answer. With both on time that is measureFor's seconds, and the rise is
// that many epochs' grants, never one more while an epoch's grant is used
// within half a second; a busy machine that delays a reading past the next
// epoch's start adds that epoch. Real pods, real time.
func perEpoch(read func() float64) float64 {
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(1500 * time.Millisecond)))
	from := time.Now()
	v0 := read()
	time.Sleep(time.Until(from.Add(measureFor)))
	v1 := read()
	epochs := time.Now().Unix() - from.Unix()
	return (v1 - v0) / float64(epochs)
}

// counter returns a counter's value, summed over its series, from /metrics.
func counter(t *testing.T, addr, name string) float64 {
	t.Helper()
	code, body := get(t, addr+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("%s/metrics: %d", addr, code)
	}
	sum, found := 0.0, false
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", addr, line, err)
			}
			sum, found = sum+v, true
		}
	}
	if !found {
		t.Fatalf("%s/metrics has no %s", addr, name)
	}
	return sum
}

// waitReplicas waits until every vertex's /status says it is among n replicas.
func waitReplicas(t *testing.T, addrs []string, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for _, a := range addrs {
		for {
			var st struct {
				Replicas int `json:"poolSize"`
			}
			if code, body := get(t, a+"/status"); code == http.StatusOK && json.Unmarshal([]byte(body), &st) == nil && st.Replicas == n {
				break
			}
			if time.Now().After(deadline) {
				_, body := get(t, a+"/status")
				t.Fatalf("%s not in a pool of %d within %v: %s", a, n, timeout, body)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// waitStatus waits until url answers code.
func waitStatus(t *testing.T, url string, code int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got, body := get(t, url)
		if got == code {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s answered %d %q, not %d, within %v", url, got, body, code, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// client also talks to the self-signed HTTPS of a vertex in Numaflow's pods,
// which probes and scrapers do not verify either.
var client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a test's own self-signed server
}}

// get returns url's status and body; 0 when nothing answers.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// freePort returns a TCP port free on 127.0.0.1 just now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
