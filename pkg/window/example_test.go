package window_test

import (
	"fmt"
	"time"

	"github.com/sluiceflow/sluice/pkg/window"
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
