package api_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/leasehold/leasehold/pkg/api"
)

// openAPIPath is the OpenAPI document, relative to this package.
const openAPIPath = "../../api/openapi.yaml"

// schema is the part of an OpenAPI schema object the test reads.
type schema struct {
	Ref        string             `json:"$ref"`
	Type       string             `json:"type"`
	Format     string             `json:"format"`
	Nullable   bool               `json:"nullable"`
	Required   []string           `json:"required"`
	Properties map[string]*schema `json:"properties"`
	AllOf      []*schema          `json:"allOf"`
	Items      *schema            `json:"items"`
	Enum       []string           `json:"enum"`
}

// loadSchemas reads components.schemas of the OpenAPI document.
func loadSchemas(t *testing.T) (map[string]*schema, []byte) {
	t.Helper()
	raw, err := os.ReadFile(openAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatalf("%s: %v", openAPIPath, err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]*schema `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatalf("%s: %v", openAPIPath, err)
	}
	return doc.Components.Schemas, raw
}

// flatten resolves s's $ref and merges an allOf into one object schema.
func flatten(t *testing.T, schemas map[string]*schema, s *schema) *schema {
	t.Helper()
	if s.Ref != "" {
		name, ok := strings.CutPrefix(s.Ref, "#/components/schemas/")
		if !ok || schemas[name] == nil {
			t.Fatalf("$ref %q resolves to no schema", s.Ref)
		}
		return flatten(t, schemas, schemas[name])
	}
	if len(s.AllOf) == 0 {
		return s
	}
	out := &schema{Type: "object", Properties: map[string]*schema{}}
	for _, part := range s.AllOf {
		p := flatten(t, schemas, part)
		out.Required = append(out.Required, p.Required...)
		for k, v := range p.Properties {
			out.Properties[k] = v
		}
	}
	return out
}

// jsonField is one field of a Go type as encoding/json sees it.
type jsonField struct {
	typ       reflect.Type
	omitEmpty bool
}

// jsonFields lists the JSON fields of struct type typ, embedded structs
// flattened as encoding/json does.
func jsonFields(typ reflect.Type) map[string]jsonField {
	out := map[string]jsonField{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		tag := f.Tag.Get("json")
		if f.Anonymous && tag == "" {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if !f.IsExported() || tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		omit := slices.ContainsFunc(strings.Split(opts, ","), func(o string) bool { return o == "omitempty" || o == "omitzero" })
		out[name] = jsonField{typ: f.Type, omitEmpty: omit}
	}
	return out
}

// wireTypes maps each object schema of the document to its Go type.
var wireTypes = map[string]reflect.Type{
	"Status":           reflect.TypeFor[api.Status](),
	"AppHealth":        reflect.TypeFor[api.AppHealth](),
	"HolderClock":      reflect.TypeFor[api.HolderClock](),
	"ApiserverClock":   reflect.TypeFor[api.ApiserverClock](),
	"ApiserverVersion": reflect.TypeFor[api.ApiserverVersion](),
	"Rank":             reflect.TypeFor[api.Rank](),
	"Leases":           reflect.TypeFor[api.Leases](),
	"Token":            reflect.TypeFor[api.Token](),
	"Release":          reflect.TypeFor[api.Release](),
	"Held":             reflect.TypeFor[api.Held](),
	"Name":             reflect.TypeFor[api.Name](),
	"Probe":            reflect.TypeFor[api.Probe](),
	"Error":            reflect.TypeFor[api.Error](),
}

// Every property of each schema is a JSON field of its Go type and vice
// versa; a required property is never omitted (no omitempty), an optional
// one is; a nullable one is a pointer; and the JSON kinds agree.
func TestTypesMatchOpenAPI(t *testing.T) {
	schemas, _ := loadSchemas(t)
	for name, s := range schemas {
		if _, ok := wireTypes[name]; !ok && (s.Type == "object" || len(s.AllOf) > 0) {
			t.Errorf("schema %s has no Go type in wireTypes", name)
		}
	}
	for name, typ := range wireTypes {
		s, ok := schemas[name]
		if !ok {
			t.Errorf("%s: no such schema in %s", name, openAPIPath)
			continue
		}
		s = flatten(t, schemas, s)
		fields := jsonFields(typ)
		for prop, ps := range s.Properties {
			f, ok := fields[prop]
			if !ok {
				t.Errorf("%s.%s is in the document but not a JSON field of api.%s", name, prop, typ.Name())
				continue
			}
			required := slices.Contains(s.Required, prop)
			if f.omitEmpty == required {
				t.Errorf("%s.%s: required %v, but omitempty %v", name, prop, required, f.omitEmpty)
			}
			checkKind(t, schemas, name+"."+prop, flatten(t, schemas, ps), f.typ)
		}
		for field := range fields {
			if _, ok := s.Properties[field]; !ok {
				t.Errorf("api.%s has JSON field %q, which schema %s lacks", typ.Name(), field, name)
			}
		}
		for _, r := range s.Required {
			if _, ok := s.Properties[r]; !ok {
				t.Errorf("%s requires %q, which it does not define", name, r)
			}
		}
	}
}

// encodesAs is the JSON kind of the wire types with a MarshalJSON of their
// own: what that method writes (TestLeaderAddressJSON checks it).
var encodesAs = map[reflect.Type]struct {
	kind     reflect.Kind
	nullable bool
}{
	reflect.TypeFor[api.LeaderAddress](): {reflect.String, true},
}

// checkKind checks that Go type typ encodes as schema s's type.
func checkKind(t *testing.T, schemas map[string]*schema, what string, s *schema, typ reflect.Type) {
	t.Helper()
	if enc, ok := encodesAs[typ]; ok {
		if enc.nullable != s.Nullable || s.Type != enc.kind.String() {
			t.Errorf("%s: %s encodes as a %s (nullable %v), the document says %s (nullable %v)", what, typ, enc.kind, enc.nullable, s.Type, s.Nullable)
		}
		return
	}
	if typ.Kind() == reflect.Pointer {
		if !s.Nullable && s.Type != "object" {
			t.Errorf("%s: a pointer (%s), but not nullable", what, typ)
		}
		typ = typ.Elem()
	} else if s.Nullable {
		t.Errorf("%s: nullable, but %s cannot be null", what, typ)
	}
	var ok bool
	switch s.Type {
	case "string":
		ok = typ.Kind() == reflect.String
	case "boolean":
		ok = typ.Kind() == reflect.Bool
	case "integer":
		switch s.Format {
		case "int32":
			ok = typ.Kind() == reflect.Int32
		case "int64":
			ok = typ.Kind() == reflect.Int64 || typ.Kind() == reflect.Uint64
		default:
			ok = typ.Kind() == reflect.Int || typ.Kind() == reflect.Int64
		}
	case "number":
		ok = s.Format == "double" && typ.Kind() == reflect.Float64
	case "object":
		ok = typ.Kind() == reflect.Struct
	case "array":
		ok = typ.Kind() == reflect.Slice
		if ok && s.Items != nil {
			checkKind(t, schemas, what+"[]", flatten(t, schemas, s.Items), typ.Elem())
		}
	}
	if !ok {
		t.Errorf("%s: type %q (format %q) in the document, %s in Go", what, s.Type, s.Format, typ)
	}
}

// The ErrorCode constants of the package are exactly the document's
// ErrorCode enum.
func TestErrorCodesMatchOpenAPI(t *testing.T) {
	schemas, _ := loadSchemas(t)
	documented := slices.Sorted(slices.Values(schemas["ErrorCode"].Enum))
	declared := errorCodeConstants(t)
	if !slices.Equal(declared, documented) {
		t.Errorf("ErrorCode constants %v, document's enum %v", declared, documented)
	}
}

// errorCodeConstants reads the values of the package's constants of type
// ErrorCode from its source.
func errorCodeConstants(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	var codes []string
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "ErrorCode" {
					continue
				}
				for _, v := range vs.Values {
					lit, ok := v.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Fatalf("%s: an ErrorCode that is not a string literal", fset.Position(v.Pos()))
					}
					codes = append(codes, strings.Trim(lit.Value, `"`))
				}
			}
		}
	}
	slices.Sort(codes)
	return codes
}

// The document names the index header IndexHeader.
func TestIndexHeaderIsDocumented(t *testing.T) {
	_, raw := loadSchemas(t)
	if !strings.Contains(string(raw), api.IndexHeader+":") {
		t.Errorf("%s never names the header %s", openAPIPath, api.IndexHeader)
	}
}

// The JSON form: a fencing token is a number, absent optional fields are
// left out, and a null lastError is written.
func TestJSONForm(t *testing.T) {
	msg := "a 403"
	for _, c := range []struct {
		v    any
		want string
	}{
		{api.Status{FencingToken: 1 << 63}, `{"identity":"","namespace":"","lease":"","leader":false,"holder":"","term":0,"fencingToken":9223372036854775808,"validForMs":0,"index":0,"candidate":false,"lastError":null}`},
		{api.Release{Released: true, Status: api.Status{Lease: "l", LastError: &msg}}, `{"released":true,"identity":"","namespace":"","lease":"l","leader":false,"holder":"","term":0,"fencingToken":0,"validForMs":0,"index":0,"candidate":false,"lastError":"a 403"}`},
		{api.Token{FencingToken: 7, Term: 2, ValidUntil: "2026-07-01T12:00:00Z", ValidForMs: 5}, `{"fencingToken":7,"term":2,"validUntil":"2026-07-01T12:00:00Z","validForMs":5}`},
		{api.Leases{Index: 3, Leases: []api.Status{}}, `{"index":3,"members":null,"leases":[]}`},
		{api.Error{Message: "not leader", Code: api.CodeNotLeader}, `{"error":"not leader","code":"not_leader"}`},
	} {
		got, err := json.Marshal(c.v)
		if err != nil || string(got) != c.want {
			t.Errorf("%T: %s, %v; want %s", c.v, got, err, c.want)
		}
	}
	if got := api.FencingToken(1042).String(); got != "1042" {
		t.Errorf("String() = %q", got)
	}
}

// leaderAddress is absent without the feature, null with it but no valid
// leader's address, else the address; each decodes back to itself.
func TestLeaderAddressJSON(t *testing.T) {
	type wrapper struct {
		A api.LeaderAddress `json:"leaderAddress,omitzero"`
	}
	for _, tc := range []struct {
		in   api.LeaderAddress
		want string
	}{
		{api.LeaderAddress{}, `{}`},
		{api.LeaderAddress{Enabled: true}, `{"leaderAddress":null}`},
		{api.LeaderAddress{Enabled: true, Address: "10.0.0.7:4042"}, `{"leaderAddress":"10.0.0.7:4042"}`},
	} {
		b, err := json.Marshal(wrapper{tc.in})
		if err != nil || string(b) != tc.want {
			t.Errorf("%+v: %s, %v; want %s", tc.in, b, err, tc.want)
			continue
		}
		var back wrapper
		if err := json.Unmarshal(b, &back); err != nil || back.A != tc.in {
			t.Errorf("%s decoded as %+v, %v; want %+v", b, back.A, err, tc.in)
		}
	}
}
