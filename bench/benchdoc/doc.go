package benchdoc

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"text/template"
)

// Doc is every section's figures, each nil when its file is missing.
type Doc struct {
	Main      *Main
	Overlap   *Overlap
	Footprint *Footprint
	Node      *Node
	Groups    *Groups
	Handover  *Handover
	Fencing   *Fencing
}

// files maps each section file's name (without .json) to its place in a
// Doc.
func (d *Doc) files() map[string]any {
	return map[string]any{
		"main": &d.Main, "overlap": &d.Overlap, "footprint": &d.Footprint, "node": &d.Node,
		"groups": &d.Groups, "handover": &d.Handover, "fencing": &d.Fencing,
	}
}

// Set is d's sections that are set, by file name.
func (d Doc) Set() map[string]any {
	set := map[string]any{}
	add := func(name string, ok bool, section any) {
		if ok {
			set[name] = section
		}
	}
	add("main", d.Main != nil, d.Main)
	add("overlap", d.Overlap != nil, d.Overlap)
	add("footprint", d.Footprint != nil, d.Footprint)
	add("node", d.Node != nil, d.Node)
	add("groups", d.Groups != nil, d.Groups)
	add("handover", d.Handover != nil, d.Handover)
	add("fencing", d.Fencing != nil, d.Fencing)
	return set
}

// Load reads every section file there is in dir.
func Load(dir string) (Doc, error) {
	var d Doc
	for name, dst := range d.files() {
		data, err := os.ReadFile(filepath.Join(dir, name+".json"))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return d, err
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(dst); err != nil {
			return d, fmt.Errorf("%s.json: %w", name, err)
		}
	}
	return d, nil
}

// Marshal is a section's file: indented JSON, fields in the struct's
// order, ending in a newline.
func Marshal(section any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(section); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Write writes one section's file, name.json, in dir (created if
// missing); name is one of the files Load reads (main, overlap, …).
func Write(dir, name string, section any) error {
	var d Doc
	if _, ok := d.files()[name]; !ok {
		return fmt.Errorf("no section %q", name)
	}
	data, err := Marshal(section)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name+".json"), data, 0o644)
}

//go:embed benchmarks.md.tmpl
var docTemplate string

var tmpl = template.Must(template.New("benchmarks.md").Funcs(funcs).Option("missingkey=error").Parse(docTemplate))

// Render is the document of d.
func Render(d Doc) ([]byte, error) {
	var b bytes.Buffer
	if err := tmpl.Execute(&b, d); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// RenderFile renders the section files in dir to the file out.
func RenderFile(dir, out string) error {
	d, err := Load(dir)
	if err != nil {
		return err
	}
	md, err := Render(d)
	if err != nil {
		return err
	}
	return os.WriteFile(out, md, 0o644)
}

// DataDir is where the section files of the document at path live:
// docs/benchmarks.md's are in docs/benchmarks/.
func DataDir(path string) string {
	return path[:len(path)-len(filepath.Ext(path))]
}
