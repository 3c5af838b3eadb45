package main

import (
	"fmt"
	"io"

	"github.com/sluiceflow/sluice/internal/cli"
)

// version is the build's version, stamped by the Makefile with
// -ldflags "-X main.version=$(git describe --tags --always --dirty)".
var version = "dev"

func runVersion(args []string, stdout io.Writer) error {
	fs := cli.NewFlagSet("version", `usage: vertex version

Prints the version of this build (from git describe when built with make; dev
otherwise).
`)
	if err := fs.ParseArgs(args, stdout); err != nil {
		return err
	}
	fmt.Fprintln(stdout, version)
	return nil
}
