package sideinputs_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/pkg/pipeline/sideinputs"
)

// constant is a Retriever with one value.
type constant string

func (c constant) Retrieve(context.Context) ([]byte, bool, error) { return []byte(c), true, nil }

// A manager asks a side input for its value and stores it; Files writes it
// where the vertex's UDF reads it, and the vertex's gate opens.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, _ := os.MkdirTemp("", "side-inputs")
	defer os.RemoveAll(dir)

	store := sideinputs.NewMemory()
	m, err := sideinputs.NewManager(sideinputs.ManagerDeps{
		SideInputs: []config.SideInput{{Name: "prices", Trigger: config.SideInputTrigger{Schedule: "@every 1m"}}},
		Retrievers: map[string]sideinputs.Retriever{"prices": constant("EUR=1.08")},
		Store:      store,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	files := sideinputs.NewFiles(dir, store, []string{"prices"}, nil)
	go m.Run(ctx)
	go files.Run(ctx)

	wctx, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	if err := files.Gate([]string{"prices"}).Wait(wctx); err != nil {
		fmt.Println(err)
		return
	}
	b, _ := os.ReadFile(filepath.Join(dir, "prices"))
	fmt.Println(string(b))
	// Output: EUR=1.08
}
