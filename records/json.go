package records

import (
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends the record as MarshalJSON writes it. Every creation
// answer, lookup and callback writes one, so it is written field by field
// instead of through encoding/json's reflection and its check of what a
// MarshalJSON returns; TestRecord_AppendJSON_matchesEncodingJSON and
// FuzzAppendJSONString hold it to encoding/json's output byte for byte.
func (r Record) AppendJSON(b []byte) []byte {
	c := &r.Common
	b = appendKey(b, '{', "transactionId")
	b = AppendJSONString(b, c.TransactionID)
	b = appendStringField(b, "bankId", c.BankID)
	b = appendStringField(b, "bank", c.Bank)
	b = appendKey(b, ',', "amount")
	b = strconv.AppendInt(b, c.Amount, 10)
	b = appendKey(b, ',', "requestedAmount")
	b = strconv.AppendInt(b, c.RequestedAmount, 10)
	b = appendStringField(b, "userId", c.UserID)
	b = appendStringField(b, "name", c.Name)
	b = appendStringField(b, "userName", c.UserName)
	b = appendStringField(b, "processId", c.ProcessID)
	b = appendStringField(b, "type", c.Type)
	b = appendStringField(b, "convertedName", c.ConvertedName)
	b = appendStringField(b, "status", c.Status)
	b = appendNullableField(b, "statusReason", c.StatusReason)
	b = appendStringField(b, "identifierKind", c.IdentifierKind)
	b = appendStringField(b, "hash", c.Hash)
	b = appendStringField(b, "createdAt", c.CreatedAt)
	b = appendStringField(b, "updatedAt", c.UpdatedAt)
	switch {
	case r.Deposit != nil:
		d := r.Deposit
		b = appendStringField(b, "bankName", d.BankName)
		b = appendStringField(b, "bankAccountName", d.BankAccountName)
		b = appendStringField(b, "bankAccountIban", d.BankAccountIban)
		b = appendNullableField(b, "senderName", d.SenderName)
		b = appendStringField(b, "lang", d.Lang)
		b = appendNullableField(b, "expiresAt", d.ExpiresAt)
		b = appendNullableField(b, "url", d.URL)
		b = appendKey(b, ',', "alreadyPending")
		b = strconv.AppendBool(b, d.AlreadyPending)
	case r.Withdrawal != nil:
		b = appendStringField(b, "accountName", r.Withdrawal.AccountName)
		b = appendStringField(b, "iban", r.Withdrawal.IBAN)
	}
	if r.Sandbox {
		b = append(b, `,"sandbox":true`...)
	}
	return append(b, '}')
}

// appendKey appends sep and a key known to need no escaping, with its colon.
func appendKey(b []byte, sep byte, key string) []byte {
	b = append(b, sep, '"')
	b = append(b, key...)
	return append(b, '"', ':')
}

func appendStringField(b []byte, key, v string) []byte {
	return AppendJSONString(appendKey(b, ',', key), v)
}

func appendNullableField(b []byte, key string, v *string) []byte {
	b = appendKey(b, ',', key)
	if v == nil {
		return append(b, "null"...)
	}
	return AppendJSONString(b, *v)
}

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s as a JSON string the way encoding/json writes
// it: HTML-sensitive characters and U+2028/U+2029 escaped, invalid UTF-8
// replaced by U+FFFD.
func AppendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
