package test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The load of TestHTTPSourceMemoryUnderLoad: posts × bodyBytes offered at once,
// far more than the http source's maxQueueBytes holds.
const (
	loadPosts      = 20
	loadBodyBytes  = 60_000_000
	loadQueueBytes = 100 << 20 // one body at a time
	// loadHeld is what the vertex's parts hold at most (docs/memory.md): the
	// http source's maxQueueBytes, and the forwarder's last batch, acked and
	// not yet overwritten, one body.
	loadHeld = loadQueueBytes + loadBodyBytes
	// loadCeiling is docs/memory.md's ceiling of what the vertex's memory
	// reaches above its baseline: (1 + GOGC/100) × loadHeld, GOGC being 100,
	// plus one body, which one allocation may add before the collector
	// catches up.
	loadCeiling = 2*loadHeld + loadBodyBytes
	// rssSlack covers what is neither baseline nor heap: connection buffers,
	// goroutine stacks, pages freed and not yet handed back to the system.
	rssSlack = 32 << 20
)

// TestHTTPSourceMemoryUnderLoad fires 20 concurrent authenticated POSTs of
// 60 MB each (generated as they are sent, never held whole by the test) at an
// http source → http sink vertex whose maxQueueBytes is 100 MiB, and reads the
// vertex's peak RSS (VmHWM) from /proc. The peak stays under the baseline
// (VmRSS before the load, after one small message) plus docs/memory.md's
// ceiling for this vertex (loadCeiling) plus rssSlack. Every request turned away gets 429 with Retry-After, and every one
// answered 204 reaches the sink once, whole and unchanged.
func TestHTTPSourceMemoryUnderLoad(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads the vertex's RSS from /proc")
	}
	sink := newVerifyingSink(t)
	cfg := writeConfig(t, `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: big-in
spec:
  source:
    http:
      maxQueueBytes: `+strconv.Itoa(loadQueueBytes)+`
      auth:
        token:
          file: `+writeSecret(t, "s3cret")+`
  sink:
    http:
      url: `+sink.URL+`
      timeout: 15s
`)
	p := start(t, "run", "-f", cfg, "--metrics-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0")
	pid := p.cmd.Process.Pid
	url := sourceURL(p, httpsAddrRE, "big-in")
	client := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true, ExpectContinueTimeout: 10 * time.Second, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}

	// A small message first: the vertex has served a request and written to
	// the sink before the baseline is taken.
	if code, _ := postLoad(client, url, "s3cret", -1, 1000, false, false); code.status != http.StatusNoContent {
		t.Fatalf("warm-up post: %+v", code)
	}
	baseline := procStatus(t, pid, "VmRSS")

	// An unauthenticated request is refused before its body is read.
	if r, _ := postLoad(client, url, "wrong", 0, loadBodyBytes, true, true); r.status != http.StatusUnauthorized || r.sent != 0 {
		t.Fatalf("wrong token: %+v; want 401 with no byte of the body sent", r)
	}

	start := time.Now()
	results := make([]loadResult, loadPosts)
	var wg sync.WaitGroup
	for i := range loadPosts {
		// Four kinds of client: with and without Content-Length (chunked),
		// with and without Expect: 100-continue.
		wg.Go(func() { results[i], _ = postLoad(client, url, "s3cret", i, loadBodyBytes, i%2 == 0, i%4 < 2) })
	}
	wg.Wait()
	elapsed := time.Since(start)
	peak := procStatus(t, pid, "VmHWM")

	accepted := map[string]int{} // X-Numaflow-Id → the post's index
	var refused, failed, partWay int
	for i, r := range results {
		switch {
		case r.err != nil:
			// A client that sends its body without waiting for 100 Continue
			// may see the connection closed on the body it is still sending.
			failed++
			t.Logf("post %d: %v", i, r.err)
		case r.status == http.StatusNoContent:
			if r.id == "" {
				t.Errorf("post %d: 204 without X-Numaflow-Id", i)
			}
			accepted[r.id] = i
		case r.status == http.StatusTooManyRequests:
			refused++
			if s, err := strconv.Atoi(r.retryAfter); err != nil || s < 1 {
				t.Errorf("post %d: 429 with Retry-After %q; want whole seconds", i, r.retryAfter)
			}
			// A body admitted beside others takes its room as it arrives, so
			// even one that waited for 100 Continue may be refused part-way
			// (docs/memory.md); what it sent is dropped.
			if r.sent > 0 {
				partWay++
			}
		default:
			t.Errorf("post %d: status %d", i, r.status)
		}
	}
	bound := baseline + loadCeiling + rssSlack
	t.Logf("%d posts of %d bytes in %v: %d accepted, %d refused with 429 (%d part-way), %d cut off; RSS baseline %.1f MiB, peak (VmHWM) %.1f MiB, bound %.1f MiB",
		loadPosts, loadBodyBytes, elapsed.Round(time.Millisecond), len(accepted), refused, partWay, failed, mib(baseline), mib(peak), mib(bound))
	if len(accepted) == 0 || refused == 0 {
		t.Errorf("%d accepted, %d refused; want some of each", len(accepted), refused)
	}
	if peak > bound {
		t.Errorf("peak RSS %.1f MiB > baseline %.1f MiB + ceiling %.0f MiB + slack %.0f MiB",
			mib(peak), mib(baseline), mib(loadCeiling), mib(rssSlack))
	}

	// An answer 204 comes after the sink took the message: each accepted one
	// is there already, once, whole.
	got := sink.received()
	for id, i := range accepted {
		r, ok := got[id]
		switch {
		case !ok:
			t.Errorf("post %d (%s) answered 204 but not at the sink", i, id)
		case r.count != 1 || r.key != "m"+strconv.Itoa(i) || !r.intact:
			t.Errorf("post %d (%s) at the sink: %+v; want once, key m%d, intact", i, id, r, i)
		}
	}
	if len(got) != len(accepted)+1 { // and the warm-up
		t.Errorf("the sink got %d messages; want the %d accepted and the warm-up", len(got), len(accepted))
	}
	if code, _ := p.stop(syscall.SIGTERM, 10*time.Second); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, p.stderrText())
	}
}

// loadResult is what one post got.
type loadResult struct {
	status     int
	id         string // X-Numaflow-Id of a 204
	retryAfter string
	sent       int64 // body bytes the client handed to the connection
	err        error
}

// postLoad posts size bytes of post i's pattern (its key is m<i>), with a
// Content-Length or chunked, and with or without Expect: 100-continue.
func postLoad(client *http.Client, url, token string, i, size int, withLength, expect bool) (loadResult, error) {
	body := &patternReader{i: i, left: int64(size)}
	req, err := http.NewRequest(http.MethodPost, url, io.NopCloser(body))
	if err != nil {
		return loadResult{err: err}, err
	}
	req.ContentLength = -1
	if withLength {
		req.ContentLength = int64(size)
	}
	if expect {
		req.Header.Set("Expect", "100-continue")
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("X-Numaflow-Keys", "m"+strconv.Itoa(i))
	resp, err := client.Do(req)
	if err != nil {
		return loadResult{sent: body.sent(), err: err}, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return loadResult{status: resp.StatusCode, id: resp.Header.Get("X-Numaflow-Id"),
		retryAfter: resp.Header.Get("Retry-After"), sent: body.sent()}, nil
}

// patternReader makes post i's body as it is read: byte n is patternByte(i, n).
type patternReader struct {
	i    int
	mu   sync.Mutex
	off  int64
	left int64
}

func (r *patternReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.left == 0 {
		return 0, io.EOF
	}
	n := fillPattern(r.i, r.off, p[:min(int64(len(p)), r.left)])
	r.off += int64(n)
	r.left -= int64(n)
	return n, nil
}

func (r *patternReader) sent() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.off
}

// patternPeriod is the length of the block the bodies repeat: a prime, so
// that a body cut, shifted or mixed up with another shows.
const patternPeriod = 65521

// pattern is the block the bodies repeat; post i's body starts at
// i·patternShift into it.
var pattern = func() []byte {
	b := make([]byte, patternPeriod)
	x := uint32(2463534242)
	for k := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[k] = byte(x)
	}
	return b
}()

const patternShift = 977

// fillPattern fills p with post i's body from offset off and returns len(p).
func fillPattern(i int, off int64, p []byte) int {
	pos := int((off + int64(i+1)*patternShift) % patternPeriod)
	n := 0
	for n < len(p) {
		c := copy(p[n:], pattern[pos:])
		n += c
		pos = 0
	}
	return n
}

// verifyingSink is an HTTP endpoint that checks each body against its post's
// pattern as it reads it, holding none.
type verifyingSink struct {
	*httptest.Server
	mu  sync.Mutex
	got map[string]sinkRecord // by X-Numaflow-Id
}

type sinkRecord struct {
	key    string
	count  int
	size   int64
	intact bool
}

func newVerifyingSink(t *testing.T) *verifyingSink {
	s := &verifyingSink{got: map[string]sinkRecord{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("X-Numaflow-Keys")
		i, err := strconv.Atoi(strings.TrimPrefix(key, "m"))
		if err != nil {
			i = -1
		}
		// Compare the body with its pattern a block at a time.
		buf, want := make([]byte, 64<<10), make([]byte, 64<<10)
		var n int64
		intact := true
		for {
			k, err := io.ReadFull(r.Body, buf)
			if k > 0 && i >= 0 && !bytes.Equal(buf[:k], want[:fillPattern(i, n, want[:k])]) {
				intact = false
			}
			n += int64(k)
			if err != nil {
				break
			}
		}
		id := r.Header.Get("X-Numaflow-Id")
		s.mu.Lock()
		rec := s.got[id]
		rec.key, rec.size, rec.intact = key, n, intact && (i < 0 || n == loadBodyBytes)
		rec.count++
		s.got[id] = rec
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *verifyingSink) received() map[string]sinkRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]sinkRecord, len(s.got))
	for k, v := range s.got {
		out[k] = v
	}
	return out
}

// procStatus returns a size field of /proc/<pid>/status (VmRSS, VmHWM) in
// bytes.
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", field, line, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// connMemCeiling is what docs/memory.md allows an idle connection kept alive
// in the vertex's RSS, over HTTPS (about 42 KiB measured) and over plain HTTP
// (about 22 KiB), with room for a busy machine's collector.
var connMemCeiling = map[string]int64{"https": 64 << 10, "http": 40 << 10}

// TestHTTPSourceConnectionMemory opens 1,000 connections to an http source,
// each answered one request and then kept alive and idle, over HTTPS and,
// in another vertex, over plain HTTP, and reads what they add to the
// vertex's RSS: per connection, under connMemCeiling.
func TestHTTPSourceConnectionMemory(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads the vertex's RSS from /proc")
	}
	const n = 1000
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur < n+100 {
		t.Skipf("needs %d open files; ulimit -n is %d (%v)", n+100, lim.Cur, err)
	}
	cfg := writeConfig(t, `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: conns
spec:
  source:
    http:
      ports: {http: 8090}
  sink:
    blackhole: {}
`)
	for _, scheme := range []string{"https", "http"} {
		t.Run(scheme, func(t *testing.T) {
			p := start(t, "run", "-f", cfg, "--metrics-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--http-plain-addr", "127.0.0.1:0")
			re := httpsAddrRE
			if scheme == "http" {
				re = plainAddrRE
			}
			url := sourceURL(p, re, "conns")
			addr, _, _ := strings.Cut(strings.TrimPrefix(url, scheme+"://"), "/")
			pid := p.cmd.Process.Pid
			before := procStatus(t, pid, "VmRSS")
			for range n {
				var c net.Conn
				var err error
				if scheme == "https" {
					c, err = tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
				} else {
					c, err = net.DialTimeout("tcp", addr, 10*time.Second)
				}
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				c.SetDeadline(time.Now().Add(20 * time.Second))
				io.WriteString(c, "POST /vertices/conns HTTP/1.1\r\nHost: sluice\r\nContent-Length: 5\r\n\r\nhello")
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil || resp.StatusCode != http.StatusNoContent {
					t.Fatalf("post: %v, %v", resp, err)
				}
			}
			after := procStatus(t, pid, "VmRSS")
			per := (after - before) / n
			t.Logf("%s: RSS %.1f MiB before, %.1f MiB with %d idle connections: %.1f KiB a connection", scheme, mib(before), mib(after), n, float64(per)/1024)
			if per > connMemCeiling[scheme] {
				t.Errorf("%.1f KiB a connection, over %d KiB", float64(per)/1024, connMemCeiling[scheme]>>10)
			}
		})
	}
}
