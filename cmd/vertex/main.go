// Command vertex is sluice's one binary: it runs a MonoVertex or a pipeline vertex,
// validates configs, simulates the rate limiter and benchmarks it.
//
//	vertex simulate --max 110 --min 10 --ramp-up 10s --mode goBackN --demand "10,20,,60"
//
// It also stands in for the numa container of the pods Numaflow's controller
// builds for a MonoVertex, which run /bin/numaflow-rs processor: installed under
// that name too, `processor` runs the MonoVertex in $NUMAFLOW_MONO_VERTEX_OBJECT.
// The name the binary is run by does not matter: `vertex processor` is the same.
//
// Exit codes: 0 success, 1 failure at run time, 2 bad arguments or config.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/sluiceflow/sluice/internal/cli"
	"github.com/sluiceflow/sluice/internal/serve"
	"github.com/sluiceflow/sluice/internal/spawn"
	"github.com/sluiceflow/sluice/pkg/vertex/autoscale/keda"
)

// usagef returns a usage error, which exits with code 2.
var usagef = cli.Usagef

const usage = `usage: vertex <command> [flags]

commands:
  run        run one replica of a MonoVertex or of a pipeline vertex, or a whole pipeline
  processor  run the MonoVertex in $NUMAFLOW_MONO_VERTEX_OBJECT, as the numa container of a Numaflow pod
  monitor    serve the runtime errors the processor records, as the monitor sidecar of a Numaflow pod
  validate   check a MonoVertex or Pipeline YAML and print every problem
  simulate   run the rate limiter on a simulated clock and print pool and grants per epoch
  scaler     serve KEDA's external scaler: the replicas the scale rule wants for each vertex
  serve      serve a vertex's sink, source or map, throttled, as a user-defined container of Numaflow
  bench      measure a MonoVertex's or a pipeline's throughput with its rate limit off and on
  isb        create, delete or describe a pipeline's JetStream buffers
  version    print the version of this build

Run 'vertex <command> -h' for a command's flags.
`

func main() {
	// A re-exec that starts a container in a mount namespace of its own
	// makes the namespace's mounts and becomes the container here.
	spawn.Isolated()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one command line and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch cmd := args[0]; cmd {
	case "run":
		err = runRun(args[1:], stdout, stderr)
	case "processor":
		err = runProcessor(args[1:], stdout, stderr)
	case "monitor":
		err = runMonitor(args[1:], stdout, stderr)
	case "validate":
		err = runValidate(args[1:], stdout, stderr)
	case "simulate":
		err = runSimulate(args[1:], stdout, stderr)
	case "scaler":
		err = keda.Command(args[1:], stdout, stderr)
	case "serve":
		err = serve.Command(args[1:], stdout, stderr)
	case "bench":
		err = runBench(args[1:], stdout, stderr)
	case "isb":
		err = runISB(args[1:], stdout, stderr)
	case "version", "--version":
		err = runVersion(args[1:], stdout)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "vertex: unknown command %q (commands: run, processor, monitor, validate, simulate, scaler, serve, bench, isb, version; see 'vertex help')\n", cmd)
		return 2
	}
	return exitCode(err, stderr)
}

func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	if errors.Is(err, cli.ErrHelp) {
		return 0
	}
	fmt.Fprintf(stderr, "vertex: %v\n", err)
	if cli.IsUsage(err) {
		return 2
	}
	return 1
}
