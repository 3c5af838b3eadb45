// Package containers starts the user-defined containers of what vertex run
// and vertex bench run, as internal/spawn chooses, and turns what the user can fix
// into usage errors that say how.
package containers

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/internal/cli"
	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/internal/spawn"
)

// SocketDirHint is what to do when a server knows only /var/run/numaflow and
// the vertex waits for it elsewhere.
const SocketDirHint = "run the vertex with --uds-dir " + serverinfo.DefaultDir +
	", or with --spawn (or --containers) and no --uds-dir, which gives each vertex's containers a " + serverinfo.DefaultDir + " of their own"

// Start decides, with spawn.Choose, where the user-defined
// containers of f that this process runs have their sockets, and starts
// those it runs (d says which replica, where their output goes); stop stops
// them and releases the directories.
func Start(ctx context.Context, f *config.File, c spawn.Choice, d spawn.Deps) (spawn.Plan, func(), error) {
	plan, err := spawn.Choose(ctx, f, c)
	var se *spawn.SharedDirError
	switch {
	case errors.As(err, &se):
		return plan, nil, cli.Usagef("%v", err)
	case err != nil && c.Engine != "":
		return plan, nil, cli.Usagef("--containers %q: %v", c.Engine, err)
	case err != nil:
		return plan, nil, err
	}
	if !plan.Start {
		return plan, plan.Release, nil
	}
	d.Commands, d.Isolate, d.Engine = plan.Deps.Commands, plan.Deps.Isolate, plan.Deps.Engine
	d.SideInputsDir = plan.SideInputsDir
	c.Log.Info("starting the user-defined containers", zap.String("how", plan.How), zap.String("dir", plan.Dir))
	g, err := spawn.Start(f, plan.Dir, d)
	var de *spawn.DirError
	var ie *spawn.ImageError
	switch {
	case err == nil:
		return plan, func() { g.Stop(); plan.Release() }, nil
	case errors.As(err, &de):
		err = cli.Usagef("%v; --uds-dir chooses another", err)
	case errors.Is(err, spawn.ErrNoCommand):
		err = cli.Usagef("%v: install podman or docker, or give the container a command for --spawn", err)
	case errors.As(err, &ie):
		err = cli.Usagef("%v", err)
	default:
		err = fmt.Errorf("starting the user-defined containers: %w", err)
	}
	plan.Release()
	return plan, nil, err
}
