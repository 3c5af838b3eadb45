package main

import (
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/pkg/apis/proto/common"
	sourcev1 "github.com/sluiceflow/sluice/pkg/apis/proto/source/v1"
	"github.com/sluiceflow/sluice/pkg/sdk/internal/sdktest"
)

// The built binary serves a source of five messages and stops on SIGTERM.
func TestProcess(t *testing.T) {
	p := sdktest.StartProcess(t, sdktest.Build(t), serverinfo.KindSource, "SIMPLESOURCE_COUNT=5", "NUMAFLOW_REPLICA=2")
	client := sourcev1.NewSourceClient(p.Conn)
	ctx := sdktest.Context(t)

	reads, err := client.ReadFn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := reads.Send(&sourcev1.ReadRequest{Handshake: &sourcev1.Handshake{Sot: true}}); err != nil {
		t.Fatal(err)
	}
	if resp, err := reads.Recv(); err != nil || !resp.GetHandshake().GetSot() {
		t.Fatalf("read handshake: %v, %v", resp, err)
	}
	if err := reads.Send(&sourcev1.ReadRequest{Request: &sourcev1.ReadRequest_Request{NumRecords: 10, TimeoutInMs: 20}}); err != nil {
		t.Fatal(err)
	}
	var got []string
	var offsets []*sourcev1.Offset
	for {
		resp, err := reads.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetStatus().GetEot() {
			break
		}
		r := resp.GetResult()
		got = append(got, fmt.Sprintf("%s@%d", r.GetPayload(), r.GetOffset().GetPartitionId()))
		offsets = append(offsets, r.GetOffset())
	}
	if fmt.Sprint(got) != "[0@2 1@2 2@2 3@2 4@2]" {
		t.Fatalf("read %v", got)
	}
	if err := reads.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := reads.Recv(); err != io.EOF {
		t.Fatalf("Recv = %v, want EOF", err)
	}

	pending, err := client.PendingFn(ctx, &emptypb.Empty{})
	if err != nil || pending.GetResult().GetCount() != 0 {
		t.Fatalf("pending = %v, %v", pending, err)
	}
	acks, err := client.AckFn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := acks.Send(&sourcev1.AckRequest{Handshake: &sourcev1.Handshake{Sot: true}}); err != nil {
		t.Fatal(err)
	}
	if resp, err := acks.Recv(); err != nil || !resp.GetHandshake().GetSot() {
		t.Fatalf("ack handshake: %v, %v", resp, err)
	}
	if err := acks.Send(&sourcev1.AckRequest{Request: &sourcev1.AckRequest_Request{Offsets: offsets[:3]}}); err != nil {
		t.Fatal(err)
	}
	if resp, err := acks.Recv(); err != nil || resp.GetResult().GetSuccess() == nil {
		t.Fatalf("ack: %v, %v", resp, err)
	}
	if err := acks.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := acks.Recv(); err != io.EOF {
		t.Fatalf("Recv = %v, want EOF", err)
	}
	// Of two unacknowledged messages nacked, the one nacked with an hour's
	// delay stays away; the other goes back to pending.
	_, err = client.NackFn(ctx, &sourcev1.NackRequest{Request: []*sourcev1.NackRequest_Request{
		{Offsets: offsets[3:4], NackOptions: &common.NackOptions{Delay: proto.Uint64(uint64(time.Hour.Milliseconds()))}},
		{Offsets: offsets[4:]},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if pending, err := client.PendingFn(ctx, &emptypb.Empty{}); err != nil || pending.GetResult().GetCount() != 1 {
		t.Fatalf("pending after nack = %v, %v", pending, err)
	}
	parts, err := client.PartitionsFn(ctx, &emptypb.Empty{})
	if err != nil || fmt.Sprint(parts.GetResult().GetPartitions()) != "[2]" {
		t.Fatalf("partitions = %v, %v", parts, err)
	}

	if err := p.Terminate(t); err != nil {
		t.Fatalf("exit: %v\n%s", err, p.Stderr())
	}
	sdktest.AssertRemoved(t, filepath.Join(p.Dir, serverinfo.SourceSocket), filepath.Join(p.Dir, serverinfo.SourceInfoFile))
}
