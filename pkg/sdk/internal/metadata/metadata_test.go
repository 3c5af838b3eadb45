package metadata

import (
	"fmt"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/sluiceflow/sluice/pkg/apis/proto/common"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestUserMetadata(t *testing.T) {
	m := NewUserMetadata()
	m.AddKV("kafka", "topic", []byte("t1"))
	m.AddKV("kafka", "acks", []byte("all"))
	m.AddKV("http", "x", nil)
	m.CreateGroup("empty")
	m.CreateGroup("kafka") // exists: unchanged
	if got := m.String(); got != `empty{} http{x=""} kafka{acks="all" topic="t1"}` {
		t.Fatalf("built %s", got)
	}
	if fmt.Sprint(m.Groups()) != "[empty http kafka]" || fmt.Sprint(m.Keys("kafka")) != "[acks topic]" || m.Len() != 3 {
		t.Errorf("groups %v keys %v len %d", m.Groups(), m.Keys("kafka"), m.Len())
	}
	if string(m.Value("kafka", "topic")) != "t1" || m.Value("kafka", "none") != nil || m.Value("none", "topic") != nil {
		t.Error("Value")
	}
	if v, ok := m.Lookup("http", "x"); !ok || len(v) != 0 {
		t.Errorf("Lookup of an empty value = %q, %v", v, ok)
	}
	if _, ok := m.Lookup("http", "y"); ok {
		t.Error("Lookup of a missing key")
	}
	if !m.HasGroup("empty") || m.HasGroup("none") || len(m.Keys("none")) != 0 {
		t.Error("HasGroup")
	}

	c := m.Clone()
	c.AddKV("kafka", "topic", []byte("t2"))
	c.RemoveGroup("http")
	if m.String() != `empty{} http{x=""} kafka{acks="all" topic="t1"}` || c.String() != `empty{} kafka{acks="all" topic="t2"}` {
		t.Fatalf("a clone's changes show in the original: %s / %s", m, c)
	}

	m.AddKV("kafka", "topic", []byte("t3")) // replaces
	m.RemoveKey("kafka", "acks")
	m.RemoveKey("kafka", "none")
	m.RemoveKey("none", "x")
	m.RemoveGroup("empty")
	m.RemoveGroup("none")
	if got := m.String(); got != `http{x=""} kafka{topic="t3"}` {
		t.Errorf("after changes %s", got)
	}
	m.RemoveKey("http", "x")
	if !m.HasGroup("http") || len(m.Keys("http")) != 0 {
		t.Error("removing a group's last key removes the group")
	}
}

// A nil *UserMetadata reads as empty; the zero value is usable.
func TestNilAndZero(t *testing.T) {
	var n *UserMetadata
	if n.Len() != 0 || n.Groups() != nil || n.Keys("g") != nil || n.Value("g", "k") != nil || n.HasGroup("g") || n.String() != "" {
		t.Error("nil does not read as empty")
	}
	n.RemoveKey("g", "k")
	n.RemoveGroup("g")
	if c := n.Clone(); c == nil || c.Len() != 0 {
		t.Errorf("clone of nil = %v", c)
	}
	var z UserMetadata
	z.AddKV("g", "k", []byte("v"))
	if z.String() != `g{k="v"}` {
		t.Errorf("zero value after AddKV: %s", z.String())
	}
}

func TestProtoRoundTrip(t *testing.T) {
	in := &common.Metadata{
		PreviousVertex: "in",
		SysMetadata:    map[string]*common.KeyValueGroup{"sys": {KeyValue: map[string][]byte{"s": []byte("1")}}},
		UserMetadata: map[string]*common.KeyValueGroup{
			"g":    {KeyValue: map[string][]byte{"a": []byte("x"), "b": {}}},
			"none": nil,
			"nil":  {},
		},
	}
	m := FromProto(in)
	if got := m.String(); got != `g{a="x" b=""} nil{} none{}` {
		t.Fatalf("from proto %s", got)
	}
	// The groups are the caller's: changing them leaves the request alone.
	m.AddKV("g", "c", []byte("y"))
	m.AddKV("nil", "k", []byte("z"))
	if len(in.UserMetadata["g"].KeyValue) != 2 || in.UserMetadata["nil"].KeyValue != nil {
		t.Fatal("changing the user metadata changed the request")
	}
	out := ToProto(m)
	want := &common.Metadata{UserMetadata: map[string]*common.KeyValueGroup{
		"g":    {KeyValue: map[string][]byte{"a": []byte("x"), "b": {}, "c": []byte("y")}},
		"nil":  {KeyValue: map[string][]byte{"k": []byte("z")}},
		"none": {KeyValue: map[string][]byte{}},
	}}
	if !proto.Equal(out, want) {
		t.Errorf("to proto %v\nwant %v", out, want)
	}
	for _, md := range []*common.Metadata{nil, {}, {SysMetadata: in.SysMetadata}} {
		if got := FromProto(md); got == nil || got.Len() != 0 {
			t.Errorf("FromProto(%v) = %v, want empty", md, got)
		}
	}
	// No user metadata: an empty Metadata, as numaflow-go sends, which
	// encodes to nothing.
	for _, m := range []*UserMetadata{nil, NewUserMetadata()} {
		got := ToProto(m)
		if got == nil || proto.Size(got) != 0 {
			t.Errorf("ToProto(%v) = %v, want an empty Metadata", m, got)
		}
	}
}
