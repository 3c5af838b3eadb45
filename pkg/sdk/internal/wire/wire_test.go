package wire

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluiceflow/sluice/pkg/apis/proto/common"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestTimeRoundTrip(t *testing.T) {
	if !Time(nil).IsZero() || Timestamp(time.Time{}) != nil {
		t.Fatal("absent timestamps must map to the zero time and back")
	}
	at := time.Date(2024, 2, 29, 23, 59, 59, 123_000_000, time.UTC)
	if got := Time(Timestamp(at)); !got.Equal(at) {
		t.Fatalf("round trip %v -> %v", at, got)
	}
}

func TestDatum(t *testing.T) {
	at := time.Unix(10, 0)
	d := NewDatum(DatumFields{ID: "i", Keys: []string{"k"}, Value: []byte("v"), EventTime: at, Watermark: at.Add(-time.Second), Headers: map[string]string{"h": "x"}})
	if d.ID() != "i" || d.Keys()[0] != "k" || string(d.Value()) != "v" || !d.EventTime().Equal(at) ||
		!d.Watermark().Equal(at.Add(-time.Second)) || d.Headers()["h"] != "x" {
		t.Fatalf("datum %+v", d)
	}
	if got := d.UserMetadata(); got == nil || got.Len() != 0 {
		t.Errorf("user metadata without metadata = %v, want empty", got)
	}
	md := &common.Metadata{UserMetadata: map[string]*common.KeyValueGroup{"g": {KeyValue: map[string][]byte{"k": []byte("v")}}}}
	d = NewDatum(DatumFields{Metadata: md})
	if got := d.UserMetadata().String(); got != `g{k="v"}` {
		t.Errorf("user metadata = %s", got)
	}
}
