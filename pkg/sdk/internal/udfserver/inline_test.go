package udfserver

import (
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/runtest"
)

// A handler run by the receiving goroutine for a tick or more is taken
// over; one that ends first is not. After a while without such handlers the
// watchdog parks, and the next one wakes it.
func TestInlineTakeOver(t *testing.T) {
	in := newInline()
	takenOver := make(chan bool, 2000)
	go in.watch(func() bool {
		ok := in.takeOver()
		takenOver <- ok
		return ok
	})
	defer in.stop()

	in.begin()
	if !<-takenOver {
		t.Fatal("takeOver of a running handler failed")
	}
	if in.end() {
		t.Fatal("end after a takeover reported the goroutine still receiving")
	}

	// Quick handlers, which end before a tick unless this goroutine is
	// descheduled for as long: on a loaded machine a few are, so the bound
	// is loose.
	taken := 0
	for range 1000 {
		in.begin()
		if !in.end() {
			taken++
			<-takenOver
		}
	}
	if taken > 100 {
		t.Errorf("%d quick handlers of 1000 taken over", taken)
	}

	runtest.WaitFor(t, "the watchdog to park", in.parked.Load, runtest.Within(10*time.Second))
	in.begin()
	if !<-takenOver {
		t.Fatal("takeOver after parking failed")
	}
	if in.end() {
		t.Fatal("end after a takeover reported the goroutine still receiving")
	}
}

// Handlers are quick while their average time stays under inlineBelow.
func TestInlineQuick(t *testing.T) {
	in := newInline()
	if !in.quick() {
		t.Fatal("not quick before any handler ran")
	}
	for range 50 {
		in.observe(time.Millisecond)
	}
	if in.quick() {
		t.Fatal("quick after handlers of a millisecond")
	}
	for range 100 {
		in.observe(time.Microsecond)
	}
	if !in.quick() {
		t.Fatalf("not quick after handlers of a microsecond (average %v)", time.Duration(in.avg.Load()))
	}
}
