package sqstest

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// bridge serves one JSON-protocol request through goaws.
func (s *Server) bridge(w http.ResponseWriter, r *http.Request) {
	action, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), "AmazonSQS.")
	if !ok {
		jsonError(w, http.StatusBadRequest, "AWS.SimpleQueueService.UnsupportedOperation", "no X-Amz-Target")
		return
	}
	if s.accessKey != "" && accessKeyOf(r) != s.accessKey {
		jsonError(w, http.StatusForbidden, "InvalidClientTokenId", "The security token included in the request is invalid.")
		return
	}
	var in map[string]any
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		jsonError(w, http.StatusBadRequest, "AWS.SimpleQueueService.InvalidParameterValue", err.Error())
		return
	}
	form := url.Values{"Action": {action}}
	flatten(form, action, in)
	s.note(action, form)
	req := httptest.NewRequestWithContext(r.Context(), http.MethodPost, "/", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	s.goaws.ServeHTTP(rec, req)
	if r.Context().Err() != nil {
		return // the client gave up a long poll
	}
	if rec.Code >= 300 {
		var e struct {
			Error struct{ Code, Message string } `xml:"Error"`
		}
		if xml.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Error.Code == "" {
			e.Error.Code, e.Error.Message = "AWS.SimpleQueueService.UnsupportedOperation", strings.TrimSpace(rec.Body.String())
		}
		jsonError(w, rec.Code, e.Error.Code, e.Error.Message)
		return
	}
	out, err := convert(action, rec.Body.Bytes())
	if err != nil {
		jsonError(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	_ = json.NewEncoder(w).Encode(out)
}

// accessKeyOf returns the access key of a SigV4-signed request.
func accessKeyOf(r *http.Request) string {
	_, cred, ok := strings.Cut(r.Header.Get("Authorization"), "Credential=")
	if !ok {
		return ""
	}
	key, _, _ := strings.Cut(cred, "/")
	return key
}

// jsonError writes an SQS JSON-protocol error. code is goaws's query code
// (AWS.SimpleQueueService.X); the SDK reads the error's type from __type and
// its query code from x-amzn-query-error.
func jsonError(w http.ResponseWriter, status int, code, msg string) {
	short := strings.TrimPrefix(code, "AWS.SimpleQueueService.")
	switch short {
	case "NonExistentQueue":
		short = "QueueDoesNotExist"
	case "InvalidMessageContents":
		short = "InvalidMessageContents"
	}
	fault := "Sender"
	if status >= 500 {
		fault = "Receiver"
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("x-amzn-query-error", code+";"+fault)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": "com.amazonaws.sqs#" + short, "message": msg})
}

// flatten writes the JSON request in into form as the query protocol has
// it.
func flatten(form url.Values, action string, in map[string]any) {
	for k, v := range in {
		switch k {
		case "Attributes": // CreateQueue, SetQueueAttributes
			for i, name := range sortedKeys(v) {
				p := "Attribute." + strconv.Itoa(i+1)
				form.Set(p+".Name", name)
				form.Set(p+".Value", scalar(v.(map[string]any)[name]))
			}
		case "AttributeNames", "MessageSystemAttributeNames":
			list(form, "AttributeName", v)
		case "MessageAttributeNames":
			list(form, "MessageAttributeName", v)
		case "MessageAttributes":
			messageAttributes(form, "", v)
		case "Entries":
			entries, _ := v.([]any)
			for i, e := range entries {
				p := action + "RequestEntry." + strconv.Itoa(i+1) + "."
				for ek, ev := range e.(map[string]any) {
					if ek == "MessageAttributes" {
						messageAttributes(form, p, ev)
						continue
					}
					form.Set(p+ek, scalar(ev))
				}
			}
		default:
			form.Set(k, scalar(v))
		}
	}
}

func list(form url.Values, prefix string, v any) {
	items, _ := v.([]any)
	for i, item := range items {
		form.Set(prefix+"."+strconv.Itoa(i+1), scalar(item))
	}
}

func messageAttributes(form url.Values, prefix string, v any) {
	attrs, _ := v.(map[string]any)
	for i, name := range sortedKeys(v) {
		p := prefix + "MessageAttribute." + strconv.Itoa(i+1)
		form.Set(p+".Name", name)
		val, _ := attrs[name].(map[string]any)
		for vk, vv := range val {
			form.Set(p+".Value."+vk, scalar(vv))
		}
	}
}

func sortedKeys(v any) []string {
	m, _ := v.(map[string]any)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func scalar(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	default:
		return fmt.Sprint(v)
	}
}

// xmlResult is the union of the results of the actions the bridge serves.
type xmlResult struct {
	QueueURL               string     `xml:"QueueUrl"`
	MessageID              string     `xml:"MessageId"`
	MD5OfMessageBody       string     `xml:"MD5OfMessageBody"`
	MD5OfMessageAttributes string     `xml:"MD5OfMessageAttributes"`
	Messages               []xmlMsg   `xml:"Message"`
	Sent                   []xmlEntry `xml:"SendMessageBatchResultEntry"`
	Deleted                []xmlEntry `xml:"DeleteMessageBatchResultEntry"`
	Failed                 []xmlEntry `xml:"BatchResultErrorEntry"`
	Attributes             []xmlNV    `xml:"Attribute"`
}

type xmlMsg struct {
	MessageID              string  `xml:"MessageId"`
	ReceiptHandle          string  `xml:"ReceiptHandle"`
	MD5OfBody              string  `xml:"MD5OfBody"`
	Body                   string  `xml:"Body"`
	MD5OfMessageAttributes string  `xml:"MD5OfMessageAttributes"`
	Attributes             []xmlNV `xml:"Attribute"`
	MessageAttributes      []struct {
		Name  string `xml:"Name"`
		Value struct {
			DataType    string `xml:"DataType"`
			StringValue string `xml:"StringValue"`
			BinaryValue string `xml:"BinaryValue"`
		} `xml:"Value"`
	} `xml:"MessageAttribute"`
}

type xmlEntry struct {
	ID                     string `xml:"Id"`
	MessageID              string `xml:"MessageId"`
	MD5OfMessageBody       string `xml:"MD5OfMessageBody"`
	MD5OfMessageAttributes string `xml:"MD5OfMessageAttributes"`
	SequenceNumber         string `xml:"SequenceNumber"`
	Code                   string `xml:"Code"`
	Message                string `xml:"Message"`
	SenderFault            bool   `xml:"SenderFault"`
}

type xmlNV struct {
	Name  string `xml:"Name"`
	Value string `xml:"Value"`
}

// convert turns goaws's XML answer to action into the JSON protocol's.
func convert(action string, body []byte) (map[string]any, error) {
	var env struct {
		Result xmlResult `xml:",any"`
	}
	if len(body) > 0 {
		// The first child of the response is its result; ResponseMetadata
		// has none of the result's fields.
		if err := xml.Unmarshal(body, &env); err != nil {
			return nil, fmt.Errorf("goaws answered %s with %q: %w", action, body, err)
		}
	}
	res := env.Result
	out := map[string]any{}
	switch action {
	case "GetQueueUrl", "CreateQueue":
		out["QueueUrl"] = res.QueueURL
	case "SendMessage":
		out["MessageId"] = res.MessageID
		out["MD5OfMessageBody"] = res.MD5OfMessageBody
		if res.MD5OfMessageAttributes != "" {
			out["MD5OfMessageAttributes"] = res.MD5OfMessageAttributes
		}
	case "ReceiveMessage":
		msgs := []any{}
		for _, m := range res.Messages {
			jm := map[string]any{"MessageId": m.MessageID, "ReceiptHandle": m.ReceiptHandle,
				"MD5OfBody": m.MD5OfBody, "Body": m.Body}
			attrs := map[string]string{}
			for _, a := range m.Attributes {
				attrs[a.Name] = a.Value
			}
			jm["Attributes"] = attrs
			if len(m.MessageAttributes) > 0 {
				mas := map[string]any{}
				for _, a := range m.MessageAttributes {
					v := map[string]any{"DataType": a.Value.DataType}
					if a.Value.StringValue != "" {
						v["StringValue"] = a.Value.StringValue
					}
					if a.Value.BinaryValue != "" {
						v["BinaryValue"] = a.Value.BinaryValue
					}
					mas[a.Name] = v
				}
				jm["MessageAttributes"] = mas
				jm["MD5OfMessageAttributes"] = m.MD5OfMessageAttributes
			}
			msgs = append(msgs, jm)
		}
		out["Messages"] = msgs
	case "SendMessageBatch", "DeleteMessageBatch":
		ok := []any{}
		for _, e := range append(res.Sent, res.Deleted...) {
			je := map[string]any{"Id": e.ID}
			if e.MessageID != "" {
				je["MessageId"] = e.MessageID
				je["MD5OfMessageBody"] = e.MD5OfMessageBody
			}
			if e.MD5OfMessageAttributes != "" {
				je["MD5OfMessageAttributes"] = e.MD5OfMessageAttributes
			}
			if e.SequenceNumber != "" {
				je["SequenceNumber"] = e.SequenceNumber
			}
			ok = append(ok, je)
		}
		failed := []any{}
		for _, e := range res.Failed {
			failed = append(failed, map[string]any{"Id": e.ID, "Code": e.Code, "Message": e.Message, "SenderFault": e.SenderFault})
		}
		out["Successful"], out["Failed"] = ok, failed
	case "GetQueueAttributes":
		attrs := map[string]string{}
		for _, a := range res.Attributes {
			attrs[a.Name] = a.Value
		}
		out["Attributes"] = attrs
	}
	return out, nil
}
