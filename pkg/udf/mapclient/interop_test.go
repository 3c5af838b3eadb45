package mapclient_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/internal/udstest"
	"github.com/sluiceflow/sluice/pkg/apis/proto/common"
	mapv1 "github.com/sluiceflow/sluice/pkg/apis/proto/map/v1"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/udf/mapclient"
)

// plainMap is a map server built on the generated code alone, with gRPC's
// default codec, as other SDKs are: each request is answered with a result
// that describes what arrived (keys, value, event time, watermark, headers
// and user metadata, as the generated message decoded them) and carries the
// request's user metadata; "nack" is nacked. In batch mode the answers
// follow the end of the batch.
type plainMap struct {
	mapv1.UnimplementedMapServer
	batch bool
}

func (p *plainMap) IsReady(context.Context, *emptypb.Empty) (*mapv1.ReadyResponse, error) {
	return &mapv1.ReadyResponse{Ready: true}, nil
}

func (p *plainMap) MapFn(stream mapv1.Map_MapFnServer) error {
	hs, err := stream.Recv()
	if err != nil || !hs.GetHandshake().GetSot() {
		return fmt.Errorf("no handshake: %v, %v", hs, err)
	}
	if err := stream.Send(&mapv1.MapResponse{Handshake: &mapv1.Handshake{Sot: true}}); err != nil {
		return err
	}
	var batch []*mapv1.MapResponse
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if p.batch && req.GetStatus().GetEot() {
			for _, resp := range append(batch, &mapv1.MapResponse{Status: &mapv1.TransmissionStatus{Eot: true}}) {
				if err := stream.Send(resp); err != nil {
					return err
				}
			}
			batch = batch[:0]
			continue
		}
		resp := &mapv1.MapResponse{Id: req.GetId(), Results: []*mapv1.MapResponse_Result{describe(req.GetRequest())}}
		if p.batch {
			batch = append(batch, resp)
		} else if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

func describe(r *mapv1.MapRequest_Request) *mapv1.MapResponse_Result {
	if string(r.GetValue()) == "nack" {
		reason := "no"
		return &mapv1.MapResponse_Result{Tags: []string{mapclient.NackTag}, NackOptions: &common.NackOptions{Reason: &reason}}
	}
	var md []string
	for g, kv := range r.GetMetadata().GetUserMetadata() {
		for k, v := range kv.GetKeyValue() {
			md = append(md, g+"."+k+"="+string(v))
		}
	}
	slices.Sort(md)
	headers := slices.Sorted(maps.Keys(r.GetHeaders()))
	for i, k := range headers {
		headers[i] = k + "=" + r.GetHeaders()[k]
	}
	desc := fmt.Sprintf("%s|%d|%d|%s|%s", r.GetValue(), r.GetEventTime().AsTime().UnixNano(), r.GetWatermark().AsTime().UnixMilli(),
		strings.Join(headers, ","), strings.Join(md, ","))
	return &mapv1.MapResponse_Result{Keys: append([]string{"out"}, r.GetKeys()...), Value: []byte(desc),
		Tags: []string{"t"}, Metadata: r.GetMetadata()}
}

// servePlain serves a plainMap in dir until the test ends.
func servePlain(t *testing.T, dir string, batch bool) {
	t.Helper()
	kind := serverinfo.KindMap
	if batch {
		kind = serverinfo.KindBatchMap
	}
	udstest.Serve(t, dir, kind, func(srv *grpc.Server) { mapv1.RegisterMapServer(srv, &plainMap{batch: batch}) })
}

// The hand-encoded requests and hand-decoded answers of the map stream
// work with a server on the generated code and gRPC's own codec.
func TestMapPlainServer(t *testing.T) {
	at := time.Date(2024, 2, 29, 23, 59, 59, 123_456_789, time.UTC)
	in := []isb.Message{
		{ID: "a", Keys: []string{"k1", "k2"}, Value: []byte("v1"), EventTime: at, Headers: map[string]string{"h": "x"},
			Metadata: isb.Metadata{"g": {"k": []byte("v")}}},
		{ID: "b", Value: []byte("nack"), EventTime: at},
		{ID: "c", EventTime: time.UnixMilli(-1)},
	}
	want := []string{
		fmt.Sprintf("a [out k1 k2] v1|%d|-1|h=x|g.k=v map[g:map[k:[118]]]", at.UnixNano()),
		"b nack no",
		fmt.Sprintf("c [out] |%d|-1|| map[]", time.UnixMilli(-1).UnixNano()),
	}
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprint("batch=", batch), func(t *testing.T) {
			dir := socketDir(t)
			servePlain(t, dir, batch)
			r := mapclient.New(dir, nil)
			connect(t, r)
			for round := range 3 { // the stream is reused batch after batch
				out, dropped, err := r.Map(context.Background(), in, nil)
				if err != nil || dropped != 0 {
					t.Fatalf("round %d: %v, %d dropped", round, err, dropped)
				}
				var got []string
				for _, m := range out {
					if m.Nack != nil {
						got = append(got, m.ID+" nack "+m.Nack.Reason)
						continue
					}
					got = append(got, fmt.Sprintf("%s %v %s %v", m.ID, m.Keys, m.Value, map[string]map[string][]byte(m.Metadata)))
				}
				if !slices.Equal(got, want) {
					t.Fatalf("round %d:\n got %q\nwant %q", round, got, want)
				}
			}
		})
	}
}
