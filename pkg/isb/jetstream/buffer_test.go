package jetstream

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluiceflow/sluice/internal/jsconsumer"
	"github.com/sluiceflow/sluice/internal/natstest"
)

func TestValidateName(t *testing.T) {
	for _, name := range []string{"p-v-0", "a", "pipe_line-vertex-12", "UPPER"} {
		if err := validateName(name); err != nil {
			t.Errorf("%q: %v", name, err)
		}
	}
	for _, name := range []string{"", "a.b", "a*", "a>", "a b", "a\tb", "a\nb", "a/b", `a\b`, "a\x00b"} {
		err := validateName(name)
		if !errors.Is(err, ErrInvalidName) {
			t.Errorf("%q: %v, want ErrInvalidName", name, err)
			continue
		}
		if name != "" && !strings.Contains(err.Error(), strconv.Quote(name)) {
			t.Errorf("%q: error %q does not name the value", name, err)
		}
	}
}

func TestBufferSpecValidate(t *testing.T) {
	cases := []struct {
		spec BufferSpec
		want string
	}{
		{BufferSpec{Name: "b", MaxLength: 1, UsageLimit: 1}, ""},
		{BufferSpec{Name: "b", MaxLength: 30000, UsageLimit: 99}, ""},
		{BufferSpec{Name: "b.c", MaxLength: 10, UsageLimit: 80}, `"b.c"`},
		{BufferSpec{Name: "b", MaxLength: 0, UsageLimit: 80}, "maxLength (0) < 1"},
		{BufferSpec{Name: "b", MaxLength: 10, UsageLimit: 100}, ""},
		{BufferSpec{Name: "b", MaxLength: 10, UsageLimit: 0}, "usageLimit (0) not in 1..100"},
		{BufferSpec{Name: "b", MaxLength: 10, UsageLimit: 101}, "usageLimit (101) not in 1..100"},
	}
	for _, c := range cases {
		err := c.spec.validate()
		if c.want == "" {
			if err != nil {
				t.Errorf("%+v: %v", c.spec, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one containing %s", c.spec, err, c.want)
		}
	}
}

// CreateBuffer twice, then from several goroutines and connections at once,
// leaves one stream and one consumer configured as designed.
func TestCreateBufferIdempotent(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t, natstest.Options{})
	conns := []*Conn{connect(t, s, nil), connect(t, s, nil), connect(t, s, nil)}
	sp := spec("pipe-v-0", 100)
	for range 2 {
		if err := conns[0].CreateBuffer(testCtx(t), sp); err != nil {
			t.Fatal(err)
		}
	}
	sp2 := spec("pipe-v-1", 100)
	var wg sync.WaitGroup
	errs := make(chan error, 12)
	for i := range 12 {
		wg.Go(func() { errs <- conns[i%len(conns)].CreateBuffer(testCtx(t), sp2) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent create: %v", err)
		}
	}

	js, err := jetstream.New(s.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"pipe-v-0", "pipe-v-1"} {
		st, err := js.Stream(testCtx(t), name)
		if err != nil {
			t.Fatal(err)
		}
		sc := st.CachedInfo().Config
		if sc.Retention != jetstream.WorkQueuePolicy || sc.Discard != jetstream.DiscardNew || sc.MaxMsgs != 100 ||
			sc.Duplicates != DefaultDuplicateWindow || sc.Storage != jetstream.FileStorage ||
			len(sc.Subjects) != 1 || sc.Subjects[0] != "sluice."+name {
			t.Fatalf("stream %s config %+v", name, sc)
		}
		cons, err := st.Consumer(testCtx(t), name)
		if err != nil {
			t.Fatal(err)
		}
		cc := cons.CachedInfo().Config
		if cc.Durable != name || cc.AckPolicy != jetstream.AckExplicitPolicy || cc.AckWait != jsconsumer.DefaultAckWait ||
			cc.MaxAckPending != 100 || cc.DeliverPolicy != jetstream.DeliverAllPolicy {
			t.Fatalf("consumer %s config %+v", name, cc)
		}
		if n := len(consumerNames(t, st)); n != 1 {
			t.Fatalf("stream %s has %d consumers", name, n)
		}
	}

	// A new MaxLength updates both.
	if err := conns[1].CreateBuffer(testCtx(t), spec("pipe-v-0", 250)); err != nil {
		t.Fatal(err)
	}
	st, _ := js.Stream(testCtx(t), "pipe-v-0")
	cons, _ := st.Consumer(testCtx(t), "pipe-v-0")
	if st.CachedInfo().Config.MaxMsgs != 250 || cons.CachedInfo().Config.MaxAckPending != 250 {
		t.Fatalf("after update: MaxMsgs %d, MaxAckPending %d", st.CachedInfo().Config.MaxMsgs, cons.CachedInfo().Config.MaxAckPending)
	}
}

// TestOrderedBufferHasOneMessageInFlight creates the buffer of an ordered
// vertex, and then the same buffer unordered: its consumer's MaxAckPending
// is 1, then MaxLength again.
func TestOrderedBufferHasOneMessageInFlight(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t, natstest.Options{})
	c := connect(t, s, nil)
	js, err := jetstream.New(s.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ordered bool
		want    int
	}{{true, 1}, {false, 100}} {
		sp := spec("pipe-ordered-0", 100)
		sp.Ordered = tc.ordered
		if err := c.CreateBuffer(testCtx(t), sp); err != nil {
			t.Fatal(err)
		}
		cons, err := js.Consumer(testCtx(t), sp.Name, sp.Name)
		if err != nil {
			t.Fatal(err)
		}
		if n := cons.CachedInfo().Config.MaxAckPending; n != tc.want {
			t.Errorf("ordered %v: MaxAckPending %d; want %d", tc.ordered, n, tc.want)
		}
	}
}

func consumerNames(t *testing.T, st jetstream.Stream) []string {
	t.Helper()
	var names []string
	l := st.ConsumerNames(testCtx(t))
	for n := range l.Name() {
		names = append(names, n)
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}

func TestDeleteBufferAndMissingBuffers(t *testing.T) {
	t.Parallel()
	_, c := setup(t, spec("gone-0", 10), nil)
	if bi := info(t, c, "gone-0"); bi != (BufferInfo{}) {
		t.Fatalf("new buffer: %+v", bi)
	}
	for range 2 { // deleting a missing buffer is fine
		if err := c.DeleteBuffer(testCtx(t), "gone-0"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.BufferInfo(testCtx(t), "gone-0"); !errors.Is(err, ErrBufferNotFound) {
		t.Fatalf("BufferInfo of a deleted buffer: %v", err)
	}
	if _, err := c.Reader("gone-0", time.Second); !errors.Is(err, ErrBufferNotFound) || !strings.Contains(err.Error(), "gone-0") {
		t.Fatalf("Reader of a deleted buffer: %v", err)
	}
	w := newWriter(t, c, spec("gone-0", 10), "src")
	errs := make([]error, 1)
	if err := w.Write(testCtx(t), messages("m", 1), errs); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(errs[0], ErrBufferNotFound) {
		t.Fatalf("Write to a deleted buffer: %v", errs[0])
	}
	for _, err := range []error{
		c.CreateBuffer(testCtx(t), spec("a.b", 10)),
		c.DeleteBuffer(testCtx(t), "a b"),
		c.Writer(spec("a>", 10), "src").Write(testCtx(t), messages("m", 1), errs),
	} {
		if !errors.Is(err, ErrInvalidName) {
			t.Fatalf("bad name: %v", err)
		}
	}
}
