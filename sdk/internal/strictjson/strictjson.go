// Package strictjson checks what encoding/json lets through silently: an
// object key given twice (the last one wins) and data after the value.
//
// encoding/json decodes {"bk": {...rate 5...}, "bk": {...rate 500...}} as
// the second "bk" without a word, so a config or an event could say two
// things and be read as one of them. Check refuses it, naming the place.
// It also matches keys to struct fields ignoring case, so {"rate": 5,
// "Rate": 500} sets one field twice; CheckFor, given the type the JSON is
// decoded into, refuses that too, while keys of maps stay case-sensitive
// ("bk" and "BK" are two channels).
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"unicode"
)

// Check returns an error if b is not exactly one JSON value, or if any
// object in it, at any depth, has a key twice. The error names the place
// as a dotted path from the root (channels.bk, properties.h1[0].channel).
// Syntax errors are left to the decoder that reads b afterwards, except
// trailing data, which that decoder may not see.
func Check(b []byte) error { return CheckFor(b, nil) }

// CheckFor is Check for JSON that is decoded into v (a pointer to it, or
// a value of its type): besides Check's errors, it refuses two keys of one
// object that set the same struct field, as "rate" and "Rate" do (a key
// with no field is left to the decoder's DisallowUnknownFields). Where
// the type says nothing (any, json.RawMessage, a type with its own
// UnmarshalJSON), keys are compared as they are, as Check does.
func CheckFor(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := value(dec, "", typeOf(v)); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("data after the JSON value at offset %d: want one value only", dec.InputOffset())
	}
	return nil
}

// value reads one value whose place is at, decoded into t (nil: a type
// that says nothing of its keys).
func value(dec *json.Decoder, at string, t reflect.Type) error {
	tok, err := dec.Token()
	if err != nil {
		return syntax(err, at)
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		fields := fieldsOf(t)
		set := map[string]string{} // field name -> the key that set it
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
			f, ok := fields.match(key)
			if ok {
				if prev, dup := set[f.name]; dup {
					return fmt.Errorf("%s: keys %q and %q both set %q (JSON decoders match keys ignoring case and keep the last); keep only %q", where, prev, key, f.name, f.name)
				}
				set[f.name] = key
			}
			if err := value(dec, where, f.typ); err != nil {
				return err
			}
		}
		_, err := dec.Token() // '}'
		return syntax(err, at)
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if err := value(dec, at+"["+strconv.Itoa(i)+"]", elem(t)); err != nil {
				return err
			}
		}
		_, err := dec.Token() // ']'
		return syntax(err, at)
	}
	return nil
}

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

// typeOf is the type v decodes as, pointers removed; nil when it says
// nothing of the keys (nil, an interface, a type that decodes itself).
func typeOf(v any) reflect.Type {
	if v == nil {
		return nil
	}
	return known(reflect.TypeOf(v))
}

func known(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		if t.Implements(unmarshaler) {
			return nil
		}
		t = t.Elem()
	}
	if t == nil || t.Kind() == reflect.Interface || t.Implements(unmarshaler) || reflect.PointerTo(t).Implements(unmarshaler) {
		return nil
	}
	return t
}

// elem is the type of t's elements (slices, arrays, maps' values).
func elem(t reflect.Type) reflect.Type {
	if t == nil {
		return nil
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array, reflect.Map:
		return known(t.Elem())
	}
	return nil
}

// field is a struct field as encoding/json names it.
type field struct {
	name string
	typ  reflect.Type
}

// fieldSet is what the keys of one object may set: a struct's fields, or
// for a map every key its own value.
type fieldSet struct {
	fields []field
	value  reflect.Type // a map's values
}

// match is the field key sets, as encoding/json picks it: the field of that
// exact name, else one whose name equals it ignoring case. A map's key
// sets nothing but its own entry.
func (s fieldSet) match(key string) (field, bool) {
	for _, f := range s.fields {
		if f.name == key {
			return f, true
		}
	}
	for _, f := range s.fields {
		if fold(f.name) == fold(key) {
			return f, true
		}
	}
	return field{typ: s.value}, false
}

// fold is a name as encoding/json compares names that differ in case.
func fold(s string) string {
	return strings.Map(func(r rune) rune { return unicode.ToUpper(unicode.ToLower(r)) }, s)
}

// fieldsOf lists what the keys of an object decoded into t set.
func fieldsOf(t reflect.Type) fieldSet {
	switch {
	case t == nil:
		return fieldSet{}
	case t.Kind() == reflect.Map:
		return fieldSet{value: elem(t)}
	case t.Kind() != reflect.Struct:
		return fieldSet{}
	}
	var out []field
	names := map[string]bool{}
	var embedded []reflect.Type
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := sf.Type
		if sf.Anonymous && name == "" {
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				embedded = append(embedded, ft) // its fields, unless a shallower one has the name
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		out = append(out, field{name: name, typ: known(sf.Type)})
		names[name] = true
	}
	for _, et := range embedded {
		for _, f := range fieldsOf(et).fields {
			if !names[f.name] {
				out = append(out, f)
				names[f.name] = true
			}
		}
	}
	return fieldSet{fields: out}
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
