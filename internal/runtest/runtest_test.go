package runtest

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// fatalTB records what Fatal is given and ends its goroutine, as the
// testing package's does.
type fatalTB struct {
	testing.TB
	msg    string
	logged string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Log(args ...any) { f.logged = fmt.Sprint(args...) }

func (f *fatalTB) Fatal(args ...any) {
	f.msg = fmt.Sprint(args...)
	runtime.Goexit()
}

// waitFor runs WaitFor on a fatalTB in a goroutine of its own and returns
// what it failed with ("" when it returned).
func waitFor(cond func() bool, opts ...WaitOption) string {
	tb := &fatalTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		WaitFor(tb, "the condition", cond, opts...)
	}()
	<-done
	return tb.msg
}

func TestWaitFor(t *testing.T) {
	t.Run("returns once cond holds", func(t *testing.T) {
		looks := 0
		if msg := waitFor(func() bool { looks++; return looks == 5 }); msg != "" {
			t.Fatalf("WaitFor failed: %s", msg)
		}
		if looks != 5 {
			t.Errorf("cond called %d times, want 5", looks)
		}
	})
	t.Run("gives up after Within's time, naming what and showing the state", func(t *testing.T) {
		began := time.Now()
		msg := waitFor(func() bool { return false }, Within(30*time.Millisecond), Showing(func() string { return "state 7" }))
		if took := time.Since(began); took < 30*time.Millisecond || took > Timeout {
			t.Errorf("gave up after %v, want 30ms or a little more", took)
		}
		if want := "timed out after 30ms waiting for the condition: state 7"; msg != want {
			t.Errorf("failed with %q, want %q", msg, want)
		}
	})
	t.Run("without Showing the message ends at what", func(t *testing.T) {
		msg := waitFor(func() bool { return false }, Within(time.Millisecond))
		if !strings.HasSuffix(msg, "waiting for the condition") {
			t.Errorf("failed with %q", msg)
		}
	})
	t.Run("Soft logs and returns false instead of failing", func(t *testing.T) {
		tb := &fatalTB{}
		if WaitFor(tb, "the condition", func() bool { return false }, Within(time.Millisecond), Soft()) {
			t.Fatal("WaitFor returned true for a condition that never holds")
		}
		if tb.msg != "" || !strings.HasSuffix(tb.logged, "waiting for the condition") {
			t.Errorf("failed with %q, logged %q; want no failure and the log", tb.msg, tb.logged)
		}
		if !WaitFor(tb, "the condition", func() bool { return true }, Soft()) {
			t.Error("WaitFor returned false for a condition that holds")
		}
	})
	t.Run("Every bounds the pause between looks", func(t *testing.T) {
		var looks []time.Time
		began := time.Now()
		WaitFor(&fatalTB{}, "the condition", func() bool { looks = append(looks, time.Now()); return len(looks) == 8 }, Every(20*time.Millisecond))
		// 1, 2, 4, 8, 16, then 20 and 20 ms: at least 71 ms.
		if took := time.Since(began); took < 71*time.Millisecond {
			t.Errorf("8 looks took %v, want at least 71ms with pauses up to 20ms", took)
		}
	})
}
