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
	b := window.NewBook(s, 0)
	count := map[window.Window]map[string]int{}
	for _, m := range []struct {
		key string
		t   time.Time
	}{
		{"a", time.Unix(30, 0)},
		{"b", time.Unix(45, 0)},
		{"a", time.Unix(59, 0)},
		{"a", time.Unix(61, 0)},
	} {
		ws, _ := b.Add([]string{m.key}, m.t)
		for _, w := range ws {
			if count[w] == nil {
				count[w] = map[string]int{}
			}
			count[w][m.key]++
		}
	}
	for _, c := range b.Advance(time.Unix(60, 0)) {
		for _, keys := range c.Keys {
			fmt.Printf("%v %s: %d at %s\n", c.Window, keys[0], count[c.Window][keys[0]], c.Window.ResultTime().UTC().Format("15:04:05.000"))
		}
	}
	fmt.Println(b.Open(), "window open")
	// Output:
	// [1970-01-01T00:00:00Z, 1970-01-01T00:01:00Z) a: 2 at 00:00:59.999
	// [1970-01-01T00:00:00Z, 1970-01-01T00:01:00Z) b: 1 at 00:00:59.999
	// 1 window open
}
