package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const sampleAnswer = `{"data":{"transactionId":"s1-1","bankId":"97b48bfb7fb34aedd95fd145","bank":"ZAINCASH","amount":1000,` +
	`"requestedAmount":1000,"userId":"u0","name":"Ali Hassan 0","userName":"user0","processId":"t-0",` +
	`"type":"deposit","convertedName":"alihassan0","status":"pending","statusReason":null,"identifierKind":"PHONE",` +
	`"hash":"KMhoqhmVN6ZpZ5VyiaQ0cJ/ntMMtxIFsu6hTnRjHiGo=","createdAt":"2026-11-23T00:07:18.248Z",` +
	`"updatedAt":"2026-11-23T00:07:18.248Z","bankName":"ZainCash","bankAccountName":"Demo Store ZC 1",` +
	`"bankAccountIban":"07801234567","senderName":null,"lang":"en","expiresAt":"2026-11-23T00:37:18.248Z",` +
	`"url":null,"alreadyPending":false},` +
	`"status":200,"responseTime":"2ms","app_version":"dev","requestId":"1ea363f2ff7629d059a826d0"}`

// reference is what json.Unmarshal makes of raw.
func reference(raw string) (txEnvelope, error) {
	var env txEnvelope
	err := json.Unmarshal([]byte(raw), &env)
	return env, err
}

func TestDecodeAnswer_asEncodingJSON(t *testing.T) {
	for name, raw := range map[string]string{
		"the gateway's answer":             sampleAnswer,
		"spaces":                           " {\n\t\"data\" : { \"transactionId\" : \"a\" , \"amount\" : -1.5e+3 } , \"code\" : null }\r\n",
		"an error answer":                  `{"data":null,"code":"invalid_amount","message":"amount must be an integer","status":400}`,
		"empty objects":                    `{"data":{}}`,
		"null fields":                      `{"data":{"transactionId":null,"amount":null,"alreadyPending":null,"hash":null}}`,
		"a repeated field":                 `{"data":{"transactionId":"a","transactionId":"b","amount":1,"amount":"2","alreadyPending":true,"alreadyPending":null}}`,
		"a key in another case":            `{"data":{"TransactionID":"a","transactionId":"b"}}`,
		"data in another case":             `{"DATA":{"transactionId":"a"}}`,
		"a repeated data":                  `{"data":{"transactionId":"a"},"data":{"bankId":"b"}}`,
		"an escape":                        `{"data":{"transactionId":"a\u0041\"b"}}`,
		"an escaped key":                   `{"\u0064ata":{"transactionId":"a"}}`,
		"non-ASCII":                        `{"data":{"processId":"é","transactionId":"\u212a"}}`,
		"a nested unknown field":           `{"data":{"extra":{"a":[1,{"b":null}]},"transactionId":"a"},"more":[]}`,
		"string amount":                    `{"data":{"amount":"25000"}}`,
		"invalid: trailing bytes":          sampleAnswer + "x",
		"invalid: two values":              `{"data":null}{}`,
		"invalid: leading zero":            `{"data":{"amount":01}}`,
		"invalid: bare minus":              `{"data":{"amount":-}}`,
		"invalid: dot without digits":      `{"data":{"amount":1.}}`,
		"invalid: exponent without digits": `{"data":{"amount":1e}}`,
		"invalid: literal":                 `{"data":{"alreadyPending":nul}}`,
		"invalid: control byte":            "{\"data\":{\"transactionId\":\"a\x01\"}}",
		"invalid: cut short":               sampleAnswer[:100],
		"invalid: a number for a string":   `{"data":{"transactionId":5}}`,
		"invalid: a string for a bool":     `{"data":{"alreadyPending":"true"}}`,
		"invalid: data not an object":      `{"data":[1]}`,
		"invalid: no comma":                `{"data":{"a":1 "b":2}}`,
		"invalid: empty":                   ``,
	} {
		t.Run(name, func(t *testing.T) {
			want, wantErr := reference(raw)
			got, err := decodeAnswer([]byte(raw))
			if wantErr != nil {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}
}

func TestDecodeAnswer_readsTheGatewaysShapeItself(t *testing.T) {
	s := answerScanner{b: []byte(sampleAnswer)}
	env, ok := s.envelope()
	require.True(t, ok, "the gateway's answer is read without encoding/json")
	want, err := reference(sampleAnswer)
	require.NoError(t, err)
	assert.Equal(t, want, env)
	assert.Equal(t, "s1-1", env.Data.TransactionID)
	assert.Equal(t, json.RawMessage("1000"), env.Data.Amount)
}

func FuzzDecodeAnswer(f *testing.F) {
	f.Add(sampleAnswer)
	f.Add(`{"data":{"amount":-0.5E-7,"alreadyPending":true},"code":"x"}`)
	f.Add(`{"data":{"TransactionId":"a"}}`)
	f.Fuzz(func(t *testing.T, raw string) {
		want, wantErr := reference(raw)
		got, err := decodeAnswer([]byte(raw))
		if (wantErr == nil) != (err == nil) {
			t.Fatalf("json.Unmarshal error %v, decodeAnswer error %v", wantErr, err)
		}
		if err == nil {
			assert.Equal(t, want, got)
		}
	})
}

// BenchmarkKeep is the load test's work on each 200 answer while it loads.
func BenchmarkKeep(b *testing.B) {
	raw := []byte(sampleAnswer)
	wk := &worker{}
	t := loadTarget{sites: []site{{}}, kind: "deposit"}
	for b.Loop() {
		wk.keep(raw, t, "t", 0)
	}
}
