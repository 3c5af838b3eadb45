package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/sluiceflow/sluice/internal/cli"
	"github.com/sluiceflow/sluice/pkg/isb/jetstream"
	"github.com/sluiceflow/sluice/pkg/pipeline"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// isbTimeout bounds `vertex isb`: connecting and every buffer's change.
const isbTimeout = 30 * time.Second

func runISB(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "create" && args[0] != "delete" && args[0] != "info") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprint(stdout, isbUsage)
			return nil
		}
		fmt.Fprint(stderr, isbUsage)
		if len(args) == 0 {
			return usagef("isb: a subcommand is required: create, delete or info")
		}
		return usagef("isb: unknown subcommand %q: want create, delete or info", args[0])
	}
	sub := args[0]
	fs := cli.NewFlagSet("isb "+sub, isbUsage+"\nflags:\n")
	file := fs.String("f", "", "the Pipeline YAML (required)")
	if err := fs.ParseArgs(args[1:], stdout); err != nil {
		return err
	}
	if *file == "" {
		return usagef("isb %s: -f FILE is required", sub)
	}
	f, err := cli.LoadConfig(*file)
	if err != nil {
		return err
	}
	if f.Pipeline == nil {
		return usagef("isb %s: %s is a MonoVertex, which has no buffers", sub, *file)
	}
	log, err := cli.NewLogger("warn", stderr)
	if err != nil {
		return err
	}
	cfg, err := vertexconfig.JetStreamConfig(f.Pipeline, log)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), isbTimeout)
	defer cancel()
	conn, err := vertexconfig.ConnectJetStream(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	for _, b := range pipeline.NewGraph(f.Pipeline).Buffers() {
		if err := isbDo(ctx, conn, sub, b, stdout); err != nil {
			return err
		}
	}
	return nil
}

// isbDo creates, deletes or describes buffer b and says what it did.
func isbDo(ctx context.Context, conn *jetstream.Conn, sub string, b pipeline.BufferSpec, stdout io.Writer) error {
	switch sub {
	case "create":
		if err := conn.CreateBuffer(ctx, b.JetStreamSpec()); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "created %s (bufferMaxLength %d, bufferUsageLimit %d%%)\n", b.Name, b.MaxLength, b.UsageLimit)
	case "delete":
		if err := conn.DeleteBuffer(ctx, b.Name); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "deleted %s\n", b.Name)
	case "info":
		info, err := conn.BufferInfo(ctx, b.Name)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: %d messages (%d unread, %d read and not acked) of at most %d\n",
			b.Name, info.Messages, info.Pending, info.AckPending, b.MaxLength)
	}
	return nil
}

const isbUsage = `usage: vertex isb create|delete|info -f PIPELINE.yaml

Creates, deletes or describes the JetStream buffers of the pipeline in
PIPELINE.yaml (spec.isb.jetstream): one stream and durable consumer per
partition of each vertex's input buffer, named <pipeline>-<vertex>-<partition>.
vertex run creates the buffers it needs itself; create is idempotent. delete
drops the buffers with their messages.
`
