package reduceclient_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/sdk/reducer"
	"github.com/sluiceflow/sluice/pkg/udf/reduceclient"
)

// A window of three messages of two keys, reduced by a counter served with
// sluice's SDK.
func Example() {
	dir, err := os.MkdirTemp("", "reduce")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	// The UDF: a count per window and keys.
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	count := func(_ context.Context, keys []string, in <-chan reducer.Datum, _ reducer.Metadata) reducer.Messages {
		n := 0
		for range in {
			n++
		}
		return reducer.Messages{reducer.NewMessage([]byte(strconv.Itoa(n))).WithKeys(keys)}
	}
	go func() { served <- reducer.NewServer(reducer.ReducerFunc(count), reducer.WithSocketDir(dir)).Start(ctx) }()
	defer func() { stop(); <-served }()

	// The runtime's side.
	c, err := reduceclient.New(dir, serverinfo.KindReduce, nil)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	w := reduceclient.Window{Start: start, End: start.Add(time.Minute)}
	msg := func(key string) reduceclient.Message {
		return reduceclient.Message{Message: isb.Message{Keys: []string{key}, Value: []byte("x"), EventTime: start.Add(time.Second)}}
	}
	results, err := c.Reduce(ctx, w, []reduceclient.Message{msg("a"), msg("b"), msg("a")})
	if err != nil {
		panic(err)
	}
	seen := map[string]string{}
	for _, r := range results {
		seen[r.Keys[0]] = fmt.Sprintf("%s at %s", r.Value, r.EventTime.Format("15:04:05.000"))
	}
	fmt.Println("a:", seen["a"])
	fmt.Println("b:", seen["b"])
	// Output:
	// a: 2 at 12:00:59.999
	// b: 1 at 12:00:59.999
}
