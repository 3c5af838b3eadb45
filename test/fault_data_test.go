package test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluiceflow/sluice/internal/natstest"
)

// The data rows of the fault suite: the test publishes numbered messages
// into a JetStream stream, a MonoVertex (or a pipeline of three vertices on
// JetStream buffers, a process each) reads them through a durable consumer
// and writes them to a log sink, and a fault hits mid-run. Every message
// must reach the sink at least once (Lost is 0); those that reach it more
// than once are counted in Duplicated.

const (
	dataCount   = 500 // messages published per run
	dataMax     = 100 // messages a second, every vertex
	dataBatch   = 25  // readBatchSize: four batches at the start of each second
	dataAckWait = 2 * time.Second
	dataFreeze  = 3 * time.Second // past dataAckWait
	dataStream  = "orders"
	dataReader  = "reader" // the durable consumer the source vertex reads through
)

// dataRun is one run of a data row.
type dataRun struct {
	srv *natstest.Server
	js  jetstream.JetStream
	// start starts a process of the vertex (a pipeline's vertex name, or
	// "mono").
	start func(vertex string) *proc
	// procs are every process of each vertex, the running one last.
	procs map[string][]*proc
	// sink is the vertex whose log-sink lines are counted.
	sink string
	// drained are the stream/consumer pairs that must have nothing pending
	// and nothing waiting for an ack before the run ends.
	drained [][2]string
}

func (d *dataRun) current(vertex string) *proc {
	ps := d.procs[vertex]
	return ps[len(ps)-1]
}

func (d *dataRun) launch(vertex string) {
	d.procs[vertex] = append(d.procs[vertex], d.start(vertex))
}

// sinkCounts counts the payloads every process of the sink vertex wrote.
func (d *dataRun) sinkCounts() map[string]int {
	var lines [][]string
	for _, p := range d.procs[d.sink] {
		lines = append(lines, p.stdoutLines())
	}
	return payloadCounts(lines...)
}

// distinct counts the published messages at the sink.
func (d *dataRun) distinct() int {
	counts := d.sinkCounts()
	n := 0
	for i := range dataCount {
		if counts[dataPayload(i)] > 0 {
			n++
		}
	}
	return n
}

func dataPayload(i int) string { return "m-" + strconv.Itoa(i) }

// idle reports whether every consumer in d.drained has nothing left to
// deliver and nothing waiting for an ack, so that no copy is still to come.
func (d *dataRun) idle() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, sc := range d.drained {
		info, err := d.consumerInfo(ctx, sc)
		if err != nil || info.NumPending > 0 || info.NumAckPending > 0 {
			return false
		}
	}
	return true
}

// consumerState is what the server says of a consumer of d.drained.
type consumerState struct {
	name                string
	ackFloor, delivered uint64 // stream sequences
	ackPending, pending int
	err                 error
}

func (c consumerState) String() string {
	if c.err != nil {
		return fmt.Sprintf("%s: %v", c.name, c.err)
	}
	return fmt.Sprintf("%s: ack floor %d, delivered %d, ack pending %d, pending %d", c.name, c.ackFloor, c.delivered, c.ackPending, c.pending)
}

// consumers returns the state of every consumer of d.drained, trying for up
// to 2 s each while the server is starting.
func (d *dataRun) consumers() []consumerState {
	var out []consumerState
	for _, sc := range d.drained {
		c := consumerState{name: sc[1]}
		for range 20 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			info, err := d.consumerInfo(ctx, sc)
			cancel()
			if c.err = err; err == nil {
				c.ackFloor, c.delivered = info.AckFloor.Stream, info.Delivered.Stream
				c.ackPending, c.pending = info.NumAckPending, int(info.NumPending)
				break
			}
			time.Sleep(100 * time.Millisecond) // the server may be recovering its streams
		}
		out = append(out, c)
	}
	return out
}

func (d *dataRun) consumerInfo(ctx context.Context, sc [2]string) (*jetstream.ConsumerInfo, error) {
	c, err := d.js.Consumer(ctx, sc[0], sc[1])
	if err != nil {
		return nil, err
	}
	return c.Info(ctx)
}

// dataFault is a fault of the data rows, caused to victim when it hits a
// vertex process.
type dataFault struct {
	name    string
	process bool // hits the victim, not the server
	do      func(t *testing.T, d *dataRun, victim string)
}

var dataFaults = []dataFault{
	{"nats-server restarted (down 1 s)", false, func(t *testing.T, d *dataRun, _ string) {
		d.srv.Stop()
		time.Sleep(time.Second) // the server stays down a while
		d.srv.Restart(t)
	}},
	{fmt.Sprintf("vertex frozen %v past ackWait %v", dataFreeze, dataAckWait), true, func(t *testing.T, d *dataRun, victim string) {
		p := d.current(victim)
		if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.cmd.Process.Signal(syscall.SIGCONT) }) // a stopped process is killed all the same
		time.Sleep(dataFreeze)                                      // frozen, as by a stop-the-world pause
		if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}},
	{"vertex killed -9, started again", true, func(t *testing.T, d *dataRun, victim string) {
		p := d.current(victim)
		if err := p.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s still running 10s after SIGKILL", victim)
		}
		time.Sleep(500 * time.Millisecond) // as long as a supervisor takes
		d.launch(victim)
	}},
}

// newDataRun starts a nats-server and fills the stream the source vertex
// reads with dataCount messages "m-0", "m-1", ..., through the durable
// consumer dataReader, whose ack wait is dataAckWait.
func newDataRun(t *testing.T) *dataRun {
	srv := natstest.Start(t, natstest.Options{})
	js, err := jetstream.New(srv.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: dataStream, Subjects: []string{dataStream + ".>"},
		Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, dataStream, jetstream.ConsumerConfig{Durable: dataReader,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: dataAckWait}); err != nil {
		t.Fatal(err)
	}
	for i := range dataCount {
		if _, err := js.Publish(ctx, dataStream+".new", []byte(dataPayload(i))); err != nil {
			t.Fatal(err)
		}
	}
	return &dataRun{srv: srv, js: js, procs: map[string][]*proc{}, drained: [][2]string{{dataStream, dataReader}}}
}

// dataFaultAt is when in a second the fault of run i comes: each second's
// batches are read, written and acked in its first 25 ms or so, and the
// runs of a row hit them at different points.
func dataFaultAt(run int) time.Duration {
	at := []time.Duration{10, 4, 16, 7, 13, 2, 19, 22}
	return at[run%len(at)] * time.Millisecond
}

// runDataFault runs d (its vertices started) through fault f on victim, the
// run-th run of its row, and records the row.
func runDataFault(t *testing.T, d *dataRun, setup string, f dataFault, victim string, run int) {
	row := faultRow{Fault: setup + ": " + f.name, Policy: "-",
		Holds: "every message at the sink at least once (lost 0); copies counted", Runs: 1}
	if f.process && len(d.procs) > 1 {
		row.Note = "victim: " + victim
	}
	defer func() {
		if t.Failed() {
			row.Failed = 1
		}
		recordFault(row)
	}()
	sink := d.current(d.sink)
	sink.waitFor(30*time.Second, "a quarter of the messages at the sink", func() bool { return len(sink.lines) >= dataCount/4 })
	consBefore := d.consumers()
	// Epochs are whole seconds of the wall clock (no store): the fault
	// comes while the batches of a second are in flight.
	sleepUntil(time.Now().Truncate(time.Second).Add(time.Second + dataFaultAt(run)))
	before := d.distinct()
	began := time.Now()
	f.do(t, d, victim)
	faultTook := time.Since(began)
	consAfter := d.consumers()
	for i, c := range consAfter {
		// An ack floor never goes back: what was acked stays acked. When
		// it does, the server lost the consumer's state, and all it had
		// acked comes again.
		if b := consBefore[i]; c.err == nil && b.err == nil && c.ackFloor < b.ackFloor {
			note := fmt.Sprintf("%s's ack floor went back from %d to %d", c.name, b.ackFloor, c.ackFloor)
			t.Logf("%s across the fault: the server lost its state", note)
			row.Note = strings.TrimPrefix(row.Note+"; "+note, "; ")
		}
	}

	deadline := time.Now().Add(45 * time.Second)
	for d.distinct() < dataCount || !d.idle() {
		if time.Now().After(deadline) {
			t.Errorf("45s after the fault: %d of %d messages at the sink; consumers idle: %t", d.distinct(), dataCount, d.idle())
			break
		}
		time.Sleep(100 * time.Millisecond) // real processes, real time
	}
	for vertex := range d.procs {
		p := d.current(vertex)
		if code, _ := p.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
			t.Errorf("%s exited %d; stderr:\n%s", vertex, code, p.stderrText())
		}
	}

	counts := d.sinkCounts()
	var lost, copied []int
	for i := range dataCount {
		switch c := counts[dataPayload(i)]; {
		case c == 0:
			lost = append(lost, i)
		case c > 1:
			row.Duplicated += c - 1
			copied = append(copied, i)
		}
		delete(counts, dataPayload(i))
	}
	row.Lost = len(lost)
	for payload, c := range counts {
		t.Errorf("the sink got %q, not a published message, %d times", payload, c)
	}
	if len(lost) > 0 {
		t.Errorf("%d messages never reached the sink: m-%s", len(lost), spans(lost))
	}
	if len(copied) > 0 {
		t.Logf("messages at the sink more than once: m-%s; the consumers before the fault: %v; just after it: %v",
			spans(copied), consBefore, consAfter)
	}
	if len(lost) > 0 {
		for vertex, ps := range d.procs {
			for i, p := range ps {
				t.Logf("%s (process %d) stderr:\n%s", vertex, i, p.stderrText())
			}
		}
		t.Logf("nats-server log:\n%s", d.srv.Log())
	}
	t.Logf("%s: the fault began %v into a second with %d of %d messages at the sink, and took %v; lost %d, copies %d",
		row.Fault, dataFaultAt(run), before, dataCount, faultTook.Round(time.Millisecond), row.Lost, row.Duplicated)
	if before >= dataCount {
		t.Errorf("the fault came after every message had reached the sink")
	}
}

// TestFaultDataJetStreamSource runs a MonoVertex that reads a JetStream
// stream through a durable consumer (ack wait 2 s) into a log sink, at 100
// messages a second, through each data fault: nats-server stopped and
// started again, the vertex frozen with SIGSTOP past the ack wait and
// continued, the vertex killed with SIGKILL and started again. Every one of
// the 500 messages reaches the sink; copies are counted.
func TestFaultDataJetStreamSource(t *testing.T) {
	t.Parallel()
	for _, f := range dataFaults {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			for run := range faultRounds(t) {
				t.Run(fmt.Sprintf("run%d", run), func(t *testing.T) {
					d := newDataRun(t)
					cfg := writeConfig(t, fmt.Sprintf(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: js-data
spec:
  limits:
    readBatchSize: %d
    readTimeout: 200ms
    rateLimit:
      max: %d
      min: %d
      rampUpDuration: 0s
  source:
    jetstream:
      url: %s
      stream: %s
      consumer: %s
  sink:
    log: {}
`, dataBatch, dataMax, dataMax, d.srv.URL, dataStream, dataReader))
					d.start = func(string) *proc {
						p := start(t, "run", "-f", cfg, "--metrics-addr", "127.0.0.1:0")
						p.metricsAddr()
						return p
					}
					d.sink = "mono"
					d.launch("mono")
					runDataFault(t, d, "JetStream source", f, "mono", run)
				})
			}
		})
	}
}

// dataVictims are the pipeline vertices the process faults hit, in turn
// from run to run: the map, the source, the sink.
var dataVictims = []string{"cat", "in", "out"}

// TestFaultDataJetStreamPipeline runs a pipeline of three vertices, each its
// own process on JetStream buffers (ack wait 2 s): in reads the stream
// through a durable consumer, cat (the built-in map) passes each message on,
// out writes it to a log sink, every vertex at 100 messages a second. Each
// data fault hits it: nats-server stopped and started again; a vertex
// frozen with SIGSTOP past the ack wait and continued; a vertex killed with
// SIGKILL and started again (the vertex is cat in the first run, then in,
// then out). Every one of the 500 messages reaches the sink; copies are
// counted.
func TestFaultDataJetStreamPipeline(t *testing.T) {
	t.Parallel()
	for _, f := range dataFaults {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			for run := range faultRounds(t) {
				t.Run(fmt.Sprintf("run%d", run), func(t *testing.T) {
					d := newDataRun(t)
					const name = "jsdata"
					cfg := writeConfig(t, fmt.Sprintf(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: %s
spec:
  limits:
    readBatchSize: %d
    readTimeout: 200ms
    rateLimit:
      max: %d
      min: %d
      rampUpDuration: 0s
`, name, dataBatch, dataMax, dataMax)+jetStreamISB(d.srv.URL, fmt.Sprintf("      ackWait: %v\n", dataAckWait))+fmt.Sprintf(`  vertices:
    - name: in
      source:
        jetstream:
          url: %s
          stream: %s
          consumer: %s
    - name: cat
      udf:
        builtin:
          name: cat
    - name: out
      sink:
        log: {}
  edges:
    - from: in
      to: cat
    - from: cat
      to: out
`, d.srv.URL, dataStream, dataReader))
					d.start = func(vertex string) *proc { return vertexProc(t, cfg, vertex, 0) }
					d.sink = "out"
					d.drained = append(d.drained, [2]string{name + "-cat-0", name + "-cat-0"}, [2]string{name + "-out-0", name + "-out-0"})
					for _, v := range []string{"out", "cat", "in"} {
						d.launch(v)
					}
					runDataFault(t, d, "JetStream pipeline", f, dataVictims[run%len(dataVictims)], run)
				})
			}
		})
	}
}

// spans writes sorted integers as spans: "0-24, 30, 75-99".
func spans(ns []int) string {
	var b strings.Builder
	for i := 0; i < len(ns); {
		j := i
		for j+1 < len(ns) && ns[j+1] == ns[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		if j > i {
			fmt.Fprintf(&b, "%d-%d", ns[i], ns[j])
		} else {
			fmt.Fprintf(&b, "%d", ns[i])
		}
		i = j + 1
	}
	return b.String()
}
