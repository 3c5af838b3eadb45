package reduce_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/reduce"
	"github.com/sluiceflow/sluice/pkg/reduce/window"
)

// A keyed count over fixed windows of ten seconds, in memory: the
// watermark closes a window and its counts come out.
func Example() {
	s, _ := window.Fixed(10 * time.Second)
	count, _ := reduce.Builtin("count", nil)
	p, err := reduce.New(reduce.Config{Strategy: s, Keyed: true, Reducer: count})
	if err != nil {
		panic(err)
	}
	p.Add(context.Background(), []isb.Message{
		{Keys: []string{"a"}, EventTime: time.Unix(1, 0)},
		{Keys: []string{"b"}, EventTime: time.Unix(4, 0)},
		{Keys: []string{"a"}, EventTime: time.Unix(9, 0)},
		{Keys: []string{"a"}, EventTime: time.Unix(12, 0)},
	})
	res, _ := p.Advance(context.Background(), time.Unix(10, 0))
	for _, r := range res {
		fmt.Printf("%s: %s at %s\n", r.Keys[0], r.Value, r.EventTime.UTC().Format("15:04:05.000"))
	}
	p.Commit() // once the results are written
	fmt.Println(p.Open(), "window open")
	// Output:
	// a: 2 at 00:00:09.999
	// b: 1 at 00:00:09.999
	// 1 window open
}
