// Package strictjson checks what encoding/json lets through silently: an
// object key given twice (the last one wins) and data after the value.
//
// encoding/json decodes {"bk": {...rate 5...}, "bk": {...rate 500...}} as
// the second "bk" without a word, so a config or an event could say two
// things and be read as one of them. Check refuses it, naming the place.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Check returns an error if b is not exactly one JSON value, or if any
// object in it, at any depth, has a key twice. The error names the place
// as a dotted path from the root (channels.bk, properties.h1[0].channel).
// Syntax errors are left to the decoder that reads b afterwards, except
// trailing data, which that decoder may not see.
func Check(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := value(dec, ""); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("data after the JSON value at offset %d: want one value only", dec.InputOffset())
	}
	return nil
}

// value reads one value whose place is at.
func value(dec *json.Decoder, at string) error {
	tok, err := dec.Token()
	if err != nil {
		return syntax(err, at)
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return syntax(err, at)
			}
			key, _ := k.(string)
			where := join(at, key)
			if seen[key] {
				return fmt.Errorf("%s: key %q appears twice in the same object; remove one (JSON decoders keep only one of them)", where, key)
			}
			seen[key] = true
			if err := value(dec, where); err != nil {
				return err
			}
		}
		_, err := dec.Token() // '}'
		return syntax(err, at)
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if err := value(dec, at+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
		_, err := dec.Token() // ']'
		return syntax(err, at)
	}
	return nil
}

// ErrSyntax is matched by the errors Check returns for JSON that is not
// well formed.
var ErrSyntax = errors.New("malformed JSON")

func syntax(err error, at string) error {
	if err == nil {
		return nil
	}
	if at == "" {
		at = "(root)"
	}
	return fmt.Errorf("%w at %s: %v", ErrSyntax, at, err)
}

func join(at, key string) string {
	if at == "" {
		return key
	}
	return at + "." + key
}
