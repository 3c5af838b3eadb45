package test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// posted is the answer an http client got, and when.
type posted struct {
	body  string
	code  int
	id    string // the answer's X-Numaflow-Id
	after time.Duration
}

// postAll posts bodies to url at once, each with a client that waits 45s and
// the X-Numaflow-Id of ids[i] when ids is given, and returns their answers
// once all have one.
func postAll(t *testing.T, url string, bodies, ids []string) []posted {
	t.Helper()
	out := make([]posted, len(bodies))
	var wg sync.WaitGroup
	for i, body := range bodies {
		wg.Go(func() {
			start := time.Now()
			req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			if ids != nil {
				req.Header.Set("X-Numaflow-Id", ids[i])
			}
			resp, err := sourceClient(45 * time.Second).Do(req)
			if err != nil {
				t.Errorf("post %s: %v", body, err)
				return
			}
			resp.Body.Close()
			out[i] = posted{body: body, code: resp.StatusCode, id: resp.Header.Get("X-Numaflow-Id"), after: time.Since(start)}
		})
	}
	wg.Wait()
	return out
}

var rejoinedRE = regexp.MustCompile(`(?m)^sluice_source_http_rejoined_total\{[^}]*\} (\S+)$`)

var warnRE = regexp.MustCompile(`"msg":"a call to the UDF server is outstanding".*"function":"map","call":"MapFn","messages":[1-5],"outstanding"`)

var oldestRE = regexp.MustCompile(`(?m)^sluice_udf_call_oldest_seconds\{function="map"[^}]*\} (\S+)$`)

// TestStuckMapHTTPSource runs vertex run on a MonoVertex with an http source
// and a map server that takes every call and never answers (slowcat with an
// hour's delay), with limits.udfTimeout 3s. The stuck call is warned about
// within seconds and abandoned at 3s, again at each retry; /readyz says the
// map is stuck, /status and sluice_udf_call_oldest_seconds show the call.
// The http clients get 504 at the http source's 30s with their message's
// X-Numaflow-Id, nothing written, and post again with it: each retry waits
// for its message in flight. Once the map is replaced by one that answers,
// the batch retried is written and the retries are answered 204, new posts
// are answered 204, and every message reaches the sink once: none lost, no
// duplicate.
func TestStuckMapHTTPSource(t *testing.T) {
	t.Parallel()
	dir := udsDir(t)
	runMap := func(name string, env ...string) *proc {
		cmd := exec.Command(example(t, name))
		cmd.Env = append(os.Environ(), "SLUICE_UDS_DIR="+dir, "NUMAFLOW_UD_CONTAINER_TYPE=udf")
		cmd.Env = append(cmd.Env, env...)
		return startCmd(t, cmd)
	}
	stuck := runMap("slowcat", "SLOWCAT_DELAY=1h")
	cfg := writeConfig(t, `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: stuck
spec:
  limits:
    readBatchSize: 10
    readTimeout: 200ms
    udfTimeout: 3s
  source:
    http: {}
  udf:
`+udContainer("    ", "", nil)+`  sink:
    log: {}
`)
	p := start(t, "run", "-f", cfg, "--uds-dir", dir, "--metrics-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0")
	obs := "http://" + p.metricsAddr()
	url := sourceURL(p, httpsAddrRE, "stuck")
	waitReady(t, obs+"/readyz", true, "")

	const n = 5
	var first, second []string
	for i := range n {
		first, second = append(first, fmt.Sprintf(`{"n":%d}`, i)), append(second, fmt.Sprintf(`{"n":%d}`, n+i))
	}
	postedAt := time.Now()
	answers := make(chan []posted, 1)
	go func() { answers <- postAll(t, url, first, nil) }()

	p.waitFor(20*time.Second, "the first warning", func() bool {
		return strings.Contains(p.stderr.String(), `"msg":"a call to the UDF server is outstanding"`)
	})
	firstWarn := time.Since(postedAt)
	p.waitFor(20*time.Second, "the call abandoned", func() bool {
		return strings.Contains(p.stderr.String(), `"msg":"a call to the UDF server got no answer within its deadline: abandoned, to be retried"`)
	})
	abandoned := time.Since(postedAt)
	if firstWarn > 5*time.Second || abandoned < 3*time.Second || abandoned > 8*time.Second {
		t.Errorf("first warning after %v, call abandoned after %v; want the warning within 5s and the deadline at 3s after the read", firstWarn, abandoned)
	}
	if !warnRE.MatchString(p.stderrText()) {
		t.Errorf("no warning names the map, MapFn and its messages; stderr:\n%s", p.stderrText())
	}
	waitReady(t, obs+"/readyz", false, "stuck")
	_, body := httpGet(t, obs+"/readyz")
	if !strings.Contains(string(body), "mapper-server-info") || !strings.Contains(string(body), "no answer within the deadline of 3s (limits.udfTimeout)") {
		t.Errorf("/readyz says %q; want the map's info file and the deadline", body)
	}
	var st struct {
		NotReady string `json:"notReady"`
		UDFCalls []struct {
			Function        string  `json:"function"`
			Call            string  `json:"call"`
			Messages        int     `json:"messages"`
			AgeSeconds      float64 `json:"ageSeconds"`
			DeadlineSeconds float64 `json:"deadlineSeconds"`
		} `json:"udfCalls"`
		WriteTotal float64 `json:"writeTotal"`
	}
	var oldest float64
	for range 100 { // between a call abandoned and its retry there is none
		_, b := httpGet(t, obs+"/status")
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatalf("/status: %v: %s", err, b)
		}
		_, m := httpGet(t, obs+"/metrics")
		if g := oldestRE.FindSubmatch(m); g != nil {
			oldest, _ = strconv.ParseFloat(string(g[1]), 64)
		}
		if len(st.UDFCalls) > 0 && oldest > 0 {
			break
		}
		time.Sleep(50 * time.Millisecond) // a real process, real time
	}
	if len(st.UDFCalls) != 1 || st.UDFCalls[0].Function != "map" || st.UDFCalls[0].Call != "MapFn" || st.UDFCalls[0].Messages < 1 || st.UDFCalls[0].Messages > n ||
		st.UDFCalls[0].AgeSeconds <= 0 || st.UDFCalls[0].DeadlineSeconds != 3 || !strings.Contains(st.NotReady, "stuck") {
		t.Errorf("/status = %+v; want the map's MapFn call of at most %d messages, its age, and notReady saying it is stuck", st, n)
	}
	if oldest <= 0 || oldest > 3.5 {
		t.Errorf("sluice_udf_call_oldest_seconds{function=map} = %v; want the age of the call, within its 3s deadline", oldest)
	}

	got := <-answers
	for _, a := range got {
		if a.code != http.StatusGatewayTimeout || a.id == "" || a.after < 29*time.Second || a.after > 40*time.Second {
			t.Errorf("%s: %d with id %q after %v; want 504 with the message's id at the http source's 30s", a.body, a.code, a.id, a.after)
		}
	}
	// The clients post again with the ids their 504s gave: each waits for
	// its message in flight.
	ids := make([]string, n)
	for i, a := range got {
		ids[i] = a.id
	}
	retried := make(chan []posted, 1)
	go func() { retried <- postAll(t, url, first, ids) }()
	for deadline := time.Now().Add(20 * time.Second); ; {
		_, m := httpGet(t, obs+"/metrics")
		if g := rejoinedRE.FindSubmatch(m); g != nil && string(g[1]) == strconv.Itoa(n) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the retries did not join their messages in flight within 20s; metrics:\n%s", m)
		}
		time.Sleep(50 * time.Millisecond) // a real process, real time
	}
	if _, b := httpGet(t, obs+"/status"); json.Unmarshal(b, &st) != nil || st.WriteTotal != 0 || len(p.stdoutLines()) != 0 {
		t.Fatalf("written %v, %d sink lines while the map never answered", st.WriteTotal, len(p.stdoutLines()))
	}
	abandons := strings.Count(p.stderrText(), "abandoned, to be retried")
	warnings := strings.Count(p.stderrText(), `"msg":"a call to the UDF server is outstanding"`)

	// A map that answers: the batch retried is written, and new posts go through.
	if err := stuck.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-stuck.done
	runMap("cat")
	p.waitFor(30*time.Second, "the retried batch at the sink", func() bool { return len(p.lines) >= n })
	waitReady(t, obs+"/readyz", true, "")
	retries := <-retried
	for _, a := range retries {
		if a.code != http.StatusNoContent {
			t.Errorf("retry of %s: %d after %v; want 204 once its message is written", a.body, a.code, a.after)
		}
	}
	after := postAll(t, url, second, nil)
	for _, a := range after {
		if a.code != http.StatusNoContent || a.after > 5*time.Second {
			t.Errorf("%s: %d after %v; want 204 at once", a.body, a.code, a.after)
		}
	}
	p.waitFor(10*time.Second, "every message at the sink", func() bool { return len(p.lines) >= 2*n })
	if code, _ := p.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, p.stderrText())
	}
	written := map[string]int{}
	for _, l := range p.stdoutLines() {
		payload, _, _ := strings.Cut(strings.TrimPrefix(l, "Payload - "), " Keys - ")
		written[payload]++
	}
	lost := 0
	for _, body := range append(first, second...) {
		switch written[body] {
		case 0:
			lost++
			t.Errorf("%s never reached the sink", body)
		case 1:
		default:
			t.Errorf("%s reached the sink %d times", body, written[body])
		}
	}
	t.Logf("udfTimeout 3s: first warning %v and first abandon %v after the posts; %d warnings and %d abandons in the 30s stuck; "+
		"clients got %d at %v, their retries with the same id %d; after the map came back: %d written, then %d posts got %d within %v; fed %d, written %d, lost %d",
		firstWarn.Round(time.Millisecond), abandoned.Round(time.Millisecond), warnings, abandons, got[0].code, slowest(got).Round(time.Millisecond),
		retries[0].code, n, n, after[0].code, slowest(after).Round(time.Millisecond), 2*n, len(p.stdoutLines()), lost)
}

// slowest is the longest any of answers took.
func slowest(answers []posted) time.Duration {
	var d time.Duration
	for _, a := range answers {
		d = max(d, a.after)
	}
	return d
}
