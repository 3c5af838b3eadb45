package nack

import (
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/sluiceflow/sluice/pkg/apis/proto/common"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestProto(t *testing.T) {
	if ToProto(nil) != nil || FromProto(nil) != nil {
		t.Fatal("nil options must stay nil")
	}
	delay, maxDeliveries, reason := uint64(1500), uint32(3), "poison"
	o := &Options{Delay: &delay, MaxDeliveries: &maxDeliveries, Reason: &reason, NackMap: map[string]string{"k": "v"}}
	p := ToProto(o)
	want := &common.NackOptions{Delay: proto.Uint64(1500), MaxDeliveries: proto.Uint32(3), Reason: proto.String("poison"), NackMap: map[string]string{"k": "v"}}
	if !proto.Equal(p, want) {
		t.Fatalf("ToProto = %v, want %v", p, want)
	}
	back := FromProto(p)
	if *back.Delay != 1500 || *back.MaxDeliveries != 3 || *back.Reason != "poison" || back.NackMap["k"] != "v" {
		t.Errorf("FromProto = %+v", back)
	}
	// Unset fields stay unset on the wire.
	if p := ToProto(&Options{}); p == nil || p.Delay != nil || p.MaxDeliveries != nil || p.Reason != nil || proto.Size(p) != 0 {
		t.Errorf("empty options = %v", p)
	}
	if Tag != `U+005C__NACK__` {
		t.Error("nack tag changed")
	}
}

func TestDelayDuration(t *testing.T) {
	var none *Options
	d := uint64(250)
	cases := []struct {
		name string
		o    *Options
		want time.Duration
	}{
		{"nil options", none, 0},
		{"no delay", &Options{}, 0},
		{"delay", &Options{Delay: &d}, 250 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.o.DelayDuration(); got != c.want {
				t.Errorf("DelayDuration = %v, want %v", got, c.want)
			}
		})
	}
}
