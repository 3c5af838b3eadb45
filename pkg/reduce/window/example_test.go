package window_test

import (
	"fmt"
	"time"

	"github.com/sluiceflow/sluice/pkg/reduce/window"
)

// A keyed count over fixed windows of a minute: messages go to their
// window, and the watermark closes it.
func Example() {
	s, err := window.Fixed(time.Minute)
	if err != nil {
		panic(err)
	}
	b := window.NewBook[string](s, 0) // each message's payload
	for _, m := range []struct {
		key, payload string
		t            time.Time
	}{
		{"a", "a1", time.Unix(30, 0)},
		{"b", "b1", time.Unix(45, 0)},
		{"a", "a2", time.Unix(59, 0)},
		{"a", "a3", time.Unix(61, 0)},
	} {
		b.Add([]string{m.key}, m.t, m.payload)
	}
	for _, c := range b.Advance(time.Unix(60, 0)) {
		for _, g := range c.Groups {
			fmt.Printf("%v %s: %d at %s\n", c.Window, g.Keys[0], len(g.Items), c.Window.ResultTime().UTC().Format("15:04:05.000"))
		}
	}
	fmt.Println(b.Open(), "window open")
	// Output:
	// [1970-01-01T00:00:00Z, 1970-01-01T00:01:00Z) a: 2 at 00:00:59.999
	// [1970-01-01T00:00:00Z, 1970-01-01T00:01:00Z) b: 1 at 00:00:59.999
	// 1 window open
}

// Sessions of a key that a gap longer than the timeout ends, and a message
// that merges two of them.
func ExampleSession() {
	s, err := window.Session(10 * time.Second)
	if err != nil {
		panic(err)
	}
	b := window.NewBook[string](s, 0)
	for _, m := range []struct {
		payload string
		t       int64
	}{{"a1", 100}, {"a2", 105}, {"a3", 122}, {"a4", 115}, {"a5", 160}} {
		ws, _ := b.Add([]string{"a"}, time.Unix(m.t, 0), m.payload)
		fmt.Printf("%s joins [%d, %d)\n", m.payload, ws[0].Start.Unix(), ws[0].End.Unix())
	}
	for _, c := range b.Advance(time.Unix(150, 0)) {
		fmt.Printf("closed [%d, %d): %v\n", c.Window.Start.Unix(), c.Window.End.Unix(), c.Groups[0].Items)
	}
	// Output:
	// a1 joins [100, 110)
	// a2 joins [100, 115)
	// a3 joins [122, 132)
	// a4 joins [100, 132)
	// a5 joins [160, 170)
	// closed [100, 132): [a1 a2 a3 a4]
}
