// Command evenodd is a map UDF that routes integers by parity: an even one
// gets key "even" and tag "even-tag", an odd one key "odd" and tag
// "odd-tag"; a payload that is not an integer is dropped.
//
// The integer is the payload itself in decimal ("42"), or the "value" field
// of a JSON object ({"value": 42}), or that of its "Data" object, as in the
// payloads of the generator source ({"Data":{"value":42},"Createdts":...}).
// The payload is passed on unchanged.
package main

import (
	"context"
	"encoding/json"
	"log"
	"strings"

	"github.com/sluiceflow/sluice/pkg/sdk/mapper"
)

func main() {
	if err := mapper.NewServer(mapper.MapperFunc(evenOdd)).Start(context.Background()); err != nil {
		log.Fatal(err)
	}
}

func evenOdd(_ context.Context, _ []string, d mapper.Datum) mapper.Messages {
	even, ok := parity(d.Value())
	if !ok {
		return mapper.Messages{mapper.MessageToDrop()}
	}
	key, tag := "odd", "odd-tag"
	if even {
		key, tag = "even", "even-tag"
	}
	return mapper.Messages{mapper.NewMessage(d.Value()).WithKeys([]string{key}).WithTags([]string{tag})}
}

// parity finds the integer in payload and tells whether it is even.
func parity(payload []byte) (even, ok bool) {
	if even, ok := decimalParity(strings.TrimSpace(string(payload))); ok {
		return even, true
	}
	var obj struct {
		Value json.RawMessage `json:"value"`
		Data  struct {
			Value json.RawMessage `json:"value"`
		} `json:"Data"`
	}
	if err := json.Unmarshal(payload, &obj); err != nil {
		return false, false
	}
	v := obj.Value
	if v == nil {
		v = obj.Data.Value
	}
	var s string
	if json.Unmarshal(v, &s) != nil { // a JSON number, or a quoted one
		s = string(v)
	}
	return decimalParity(s)
}

// decimalParity reports the parity of a decimal integer of any size, with
// an optional sign.
func decimalParity(s string) (even, ok bool) {
	digits := strings.TrimLeft(s, "+-")
	if digits == "" || len(s)-len(digits) > 1 {
		return false, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false, false
		}
	}
	return (digits[len(digits)-1]-'0')%2 == 0, true
}
