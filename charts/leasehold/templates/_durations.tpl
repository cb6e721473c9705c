{{/*
Go durations in templates, so that the chart refuses at render time the
timings the sidecar refuses at start, with the sidecar's own messages
(leasehold.validateTimings in _helpers.tpl).
*/}}

{{/*
leasehold.durationNanos: the Go duration string given (one or more
<digits>[.<digits>]<unit>, unit ns, us, µs, ms, s, m or h: what
values.schema.json admits) in nanoseconds, as time.ParseDuration reads it.
Fraction digits finer than a nanosecond are dropped (ParseDuration rounds
them through a float64: neither changes a whole nanosecond of the
durations the schema admits); durations beyond about 292 years
(time.Duration's range) are not supported.
*/}}
{{- define "leasehold.durationNanos" -}}
{{- $units := dict "ns" 1 "us" 1000 "µs" 1000 "ms" 1000000 "s" 1000000000 "m" 60000000000 "h" 3600000000000 }}
{{- /* How many fraction digits each unit resolves to a whole nanosecond. */}}
{{- $digits := dict "ns" 0 "us" 3 "µs" 3 "ms" 6 "s" 9 "m" 10 "h" 11 }}
{{- $total := 0 }}
{{- range $part := regexFindAll "[0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h)" . -1 }}
{{- $unit := regexFind "(ns|us|µs|ms|s|m|h)$" $part }}
{{- $scale := get $units $unit }}
{{- $number := trimSuffix $unit $part | splitList "." }}
{{- $total = add $total (mul (atoi (first $number)) $scale) }}
{{- if gt (len $number) 1 }}
{{- $fraction := last $number | trunc (int (get $digits $unit)) }}
{{- if $fraction }}
{{- $total = add $total (mul (atoi $fraction) (div $scale (atoi (printf "1%s" (repeat (len $fraction) "0"))))) }}
{{- end }}
{{- end }}
{{- end }}
{{- $total }}
{{- end }}

{{/*
leasehold.durationString: a number of nanoseconds (an integer) written as
Go's time.Duration.String writes it (0s, 1.5ms, 2s, 1m30s, 1h0m0s): how the
sidecar's messages show a duration.
*/}}
{{- define "leasehold.durationString" -}}
{{- $d := int64 . }}
{{- if eq $d 0 }}0s
{{- else if lt $d 1000 }}{{ $d }}ns
{{- else if lt $d 1000000 }}{{ include "leasehold.decimal" (list $d 1000 3) }}µs
{{- else if lt $d 1000000000 }}{{ include "leasehold.decimal" (list $d 1000000 6) }}ms
{{- else }}
{{- $hours := div $d 3600000000000 }}
{{- $minutes := div (mod $d 3600000000000) 60000000000 }}
{{- if gt $hours 0 }}{{ $hours }}h{{ end }}
{{- if or (gt $hours 0) (gt $minutes 0) }}{{ $minutes }}m{{ end }}
{{- include "leasehold.decimal" (list (mod $d 60000000000) 1000000000 9) }}s
{{- end }}
{{- end }}

{{/*
leasehold.decimal: (list n unit digits) → n / unit as a decimal, with the
fraction's trailing zeros (and a bare point) left out: (list 1500 1000 3)
→ 1.5.
*/}}
{{- define "leasehold.decimal" -}}
{{- $n := index . 0 }}{{ $unit := index . 1 }}
{{- div $n $unit }}
{{- with mod $n $unit }}.{{ regexReplaceAll "0+$" (printf "%0*d" (index $ 2) .) "" }}{{ end }}
{{- end }}
