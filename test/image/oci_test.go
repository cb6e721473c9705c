package image_test

import (
	"archive/tar"
	"bytes"
	"cmp"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// sourceDateEpoch is the commit time the test gives make image: created.
const sourceDateEpoch = "1700000000"

// ociDescriptor, ociIndex, ociManifest and ociConfig are the parts of the
// OCI image layout the tests read (image-spec v1.1).
type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations"`
	Platform    *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform"`
}

type ociIndex struct {
	MediaType string          `json:"mediaType"`
	Manifests []ociDescriptor `json:"manifests"`
}

type ociManifest struct {
	MediaType string          `json:"mediaType"`
	Config    ociDescriptor   `json:"config"`
	Layers    []ociDescriptor `json:"layers"`
}

type ociConfig struct {
	OS           string         `json:"os"`
	Architecture string         `json:"architecture"`
	Created      string         `json:"created"`
	Config       map[string]any `json:"config"`
}

// makeImage runs make image into a fresh directory with the test's
// version, revision and commit time, and returns the directory.
func makeImage(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	dir := t.TempDir()
	cmd := exec.CommandContext(t.Context(), "make", "--no-print-directory", "image", "IMAGE_DIR="+dir,
		"VERSION="+version, "REVISION="+revision, "SOURCE_DATE_EPOCH="+sourceDateEpoch)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	return dir
}

// blob reads a blob of the layout at dir, checking its digest.
func blob(t *testing.T, dir, digest string) []byte {
	t.Helper()
	hexDigest, ok := strings.CutPrefix(digest, "sha256:")
	if !ok {
		t.Fatalf("digest %s: want sha256", digest)
	}
	data, err := os.ReadFile(filepath.Join(dir, "blobs", "sha256", hexDigest))
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != hexDigest {
		t.Fatalf("blob %s has digest sha256:%x", digest, sum)
	}
	return data
}

func unmarshal(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%v in %s", err, data)
	}
}

// filesDigests maps every file under dir (but the binaries make image
// built them from) to its SHA-256.
func filesDigests(t *testing.T, dir string) map[string]string {
	t.Helper()
	sums := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		data, err := os.ReadFile(path)
		sum := sha256.Sum256(data)
		sums[rel] = hex.EncodeToString(sum[:])
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return sums
}

// make image builds the image with no container engine, reproducibly: two
// runs for the same commit write the same files, byte for byte, so the
// same index, manifest and layer digests.
func TestMakeImageIsReproducible(t *testing.T) {
	a, b := makeImage(t), makeImage(t)
	sumsA, sumsB := filesDigests(t, a), filesDigests(t, b)
	if !maps.Equal(sumsA, sumsB) {
		for _, f := range slices.Sorted(maps.Keys(sumsA)) {
			if sumsA[f] != sumsB[f] {
				t.Errorf("%s: sha256 %s, then %s", f, sumsA[f], cmp.Or(sumsB[f], "no such file"))
			}
		}
		for _, f := range slices.Sorted(maps.Keys(sumsB)) {
			if sumsA[f] == "" {
				t.Errorf("%s: only in the second run", f)
			}
		}
		t.Fatalf("two runs of make image wrote different files")
	}
	digests, err := os.ReadFile(filepath.Join(a, "digests.txt"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d files alike in two runs; digests:\n%s", len(sumsA), digests)
}

// make image's image is the one the Dockerfile describes: an OCI index of
// linux/amd64 and linux/arm64, each image a single layer holding only the
// static binary at the ENTRYPOINT's path (mode 0755, owned by 0:0, its
// time the commit's), configured with the Dockerfile's USER, ENTRYPOINT and
// LABELs and nothing else (no Env, Cmd, WorkingDir, ports or volumes, as
// FROM scratch), created at the commit's time; the layout's index.json
// names it for `ctr images import`. Each binary is built with the
// Dockerfile's flags: static, for its platform, with the Dockerfile's
// binary's build settings (VCS stamps aside: the Dockerfile's context has no
// .git).
func TestMakeImageIsTheDockerfilesImage(t *testing.T) {
	dir := makeImage(t)
	layout := filepath.Join(dir, "oci")
	var top ociIndex
	data, err := os.ReadFile(filepath.Join(layout, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	unmarshal(t, data, &top)
	if len(top.Manifests) != 1 || top.Manifests[0].MediaType != "application/vnd.oci.image.index.v1+json" {
		t.Fatalf("index.json %s: want one image index", data)
	}
	tag := strings.TrimPrefix(version, "v")
	if name := top.Manifests[0].Annotations["io.containerd.image.name"]; name != "ghcr.io/leasehold/leasehold:"+tag {
		t.Errorf("index.json names the image %q, want ghcr.io/leasehold/leasehold:%s", name, tag)
	}
	var idx ociIndex
	unmarshal(t, blob(t, layout, top.Manifests[0].Digest), &idx)

	createdAt, err := time.Parse(time.RFC3339, created)
	if err != nil {
		t.Fatal(err)
	}
	var entrypoint []string
	if err := json.Unmarshal([]byte(docker.entrypoint), &entrypoint); err != nil {
		t.Fatal(err)
	}
	dockerInfo, err := buildinfo.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	var platforms []string
	for _, m := range idx.Manifests {
		if m.Platform == nil {
			t.Fatalf("index entry %s has no platform", m.Digest)
		}
		platform := m.Platform.OS + "/" + m.Platform.Architecture
		platforms = append(platforms, platform)
		var man ociManifest
		unmarshal(t, blob(t, layout, m.Digest), &man)
		if man.MediaType != "application/vnd.oci.image.manifest.v1+json" || len(man.Layers) != 1 {
			t.Fatalf("%s: manifest %+v: want an OCI manifest of one layer", platform, man)
		}
		var cfg ociConfig
		unmarshal(t, blob(t, layout, man.Config.Digest), &cfg)
		if cfg.OS+"/"+cfg.Architecture != platform || cfg.Created != created {
			t.Errorf("%s: config says %s/%s created %s, want %s created %s", platform, cfg.OS, cfg.Architecture, cfg.Created, platform, created)
		}
		want := map[string]any{"User": docker.finalUser, "Entrypoint": toAny(entrypoint), "Labels": toAnyMap(docker.labels)}
		if got, _ := json.Marshal(cfg.Config); string(got) != mustJSON(t, want) {
			t.Errorf("%s: config\n%s\nwant the Dockerfile's (USER, ENTRYPOINT, LABEL, nothing else)\n%s", platform, got, mustJSON(t, want))
		}

		bin := layerFile(t, blob(t, layout, man.Layers[0].Digest), strings.TrimPrefix(entrypoint[0], "/"), createdAt)
		path := filepath.Join(t.TempDir(), "leasehold")
		if err := os.WriteFile(path, bin, 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := elf.Open(path)
		if err != nil {
			t.Fatalf("%s: %v", platform, err)
		}
		if f.Machine != machines[m.Platform.Architecture] {
			t.Errorf("%s: the binary is for %v", platform, f.Machine)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
				t.Errorf("%s: program header %v: want a static binary", platform, p.Type)
			}
		}
		f.Close()
		info, err := buildinfo.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := settings(info, m.Platform.Architecture), settings(dockerInfo, m.Platform.Architecture); !maps.Equal(got, want) {
			t.Errorf("%s: build settings %v, want the Dockerfile's %v", platform, got, want)
		}
		if !bytes.Contains(bin, []byte(version)) {
			t.Errorf("%s: the binary does not carry the version %s", platform, version)
		}
	}
	if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(platforms, want) {
		t.Errorf("index platforms %v, want %v", platforms, want)
	}
}

// layerFile returns the one file of a gzipped layer, after checking that it
// is the only entry, at name, mode 0755, owned by 0:0, with mtime mtime.
func layerFile(t *testing.T, layer []byte, name string, mtime time.Time) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(layer))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var file []byte
	for n := 0; ; n++ {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if n > 0 || hdr.Name != name || hdr.Typeflag != tar.TypeReg || hdr.Mode != 0o755 || hdr.Uid != 0 || hdr.Gid != 0 || !hdr.ModTime.Equal(mtime) {
			t.Fatalf("layer entry %d: %s type %c mode %o %d:%d %s; want only %s, a file, 0755, 0:0, %s",
				n, hdr.Name, hdr.Typeflag, hdr.Mode, hdr.Uid, hdr.Gid, hdr.ModTime.UTC(), name, mtime)
		}
		if file, err = io.ReadAll(tr); err != nil {
			t.Fatal(err)
		}
	}
	if file == nil {
		t.Fatalf("the layer holds no %s", name)
	}
	return file
}

// settings are a binary's build settings but the VCS stamps, with GOARCH
// set to arch (the Dockerfile's binary is the test machine's).
func settings(info *buildinfo.BuildInfo, arch string) map[string]string {
	s := map[string]string{"go": info.GoVersion, "path": info.Path}
	for _, kv := range info.Settings {
		if !strings.HasPrefix(kv.Key, "vcs") && !strings.HasPrefix(kv.Key, "GOAMD64") && !strings.HasPrefix(kv.Key, "GOARM64") {
			s[kv.Key] = kv.Value
		}
	}
	s["GOARCH"] = arch
	return s
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func toAnyMap(m map[string]string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(fmt.Errorf("%v: %w", v, err))
	}
	return string(data)
}
