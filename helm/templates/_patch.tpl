{{/*
merge and patch, as every object (and nats.conf block) of the nats-io chart takes them:
`merge` is deep-merged into the object, then `patch` (an RFC 6902 JSON Patch: add, remove,
replace, move, copy, test; paths are RFC 6901 JSON Pointers) is applied to the result.

Call with a dict; the result is left in its "doc" key:
  {{- $mp := dict "doc" $obj "merge" .Values.x.merge "patch" .Values.x.patch "what" "x" }}
  {{- include "natsd.mergePatch" $mp }}{{ $obj = $mp.doc }}
"what" names the values in error messages. The document is copied first: the values it was
built from are never changed.
*/}}
{{- define "natsd.mergePatch" -}}
{{- $doc := deepCopy (.doc | default dict) -}}
{{- with .merge }}{{ $doc = mergeOverwrite $doc (deepCopy .) }}{{ end -}}
{{- $h := dict "doc" $doc -}}
{{- $patch := .patch | default list -}}
{{- if not (kindIs "slice" $patch) }}{{ fail (printf "%s.patch: a JSON Patch is a list of operations" .what) }}{{ end -}}
{{- range $i, $p := $patch -}}
{{- include "natsd.jp.op" (dict "h" $h "p" $p "what" (printf "%s.patch[%d]" $.what $i)) -}}
{{- end -}}
{{- $_ := set . "doc" $h.doc -}}
{{- end -}}

{{/* One operation .p on .h.doc */}}
{{- define "natsd.jp.op" -}}
{{- $p := .p -}}
{{- $what := .what -}}
{{- if not (kindIs "map" $p) }}{{ fail (printf "%s: an operation is a map {op, path, ...}" $what) }}{{ end -}}
{{- $op := toString (get $p "op") -}}
{{- if not (has $op (list "add" "remove" "replace" "move" "copy" "test")) -}}
{{- fail (printf "%s: op %q is not add, remove, replace, move, copy or test" $what $op) -}}
{{- end -}}
{{- if not (hasKey $p "path") }}{{ fail (printf "%s: no path" $what) }}{{ end -}}
{{- if and (has $op (list "add" "replace" "test")) (not (hasKey $p "value")) }}{{ fail (printf "%s: op %s needs a value" $what $op) }}{{ end -}}
{{- if and (has $op (list "move" "copy")) (not (hasKey $p "from")) }}{{ fail (printf "%s: op %s needs from" $what $op) }}{{ end -}}
{{- $path := include "natsd.jp.tokens" (dict "ptr" $p.path "what" $what) | fromJsonArray -}}
{{- $value := get $p "value" -}}
{{- if has $op (list "move" "copy") -}}
{{- $from := include "natsd.jp.tokens" (dict "ptr" $p.from "what" $what) | fromJsonArray -}}
{{- if and (eq $op "move") (ne (toString $p.path) (toString $p.from)) (hasPrefix (printf "%s/" $p.from) (toString $p.path)) -}}
{{- fail (printf "%s: cannot move %s into its own child %s" $what $p.from $p.path) -}}
{{- end -}}
{{- $out := dict -}}
{{- include "natsd.jp.get" (dict "node" $.h.doc "t" $from "out" $out "what" $what) -}}
{{- $value = $out.v -}}
{{- if eq $op "move" -}}
{{- include "natsd.jp.at" (dict "h" $.h "k" "doc" "t" $from "mode" "remove" "what" $what) -}}
{{- end -}}
{{- end -}}
{{- if eq $op "test" -}}
{{- $out := dict -}}
{{- include "natsd.jp.get" (dict "node" .h.doc "t" $path "out" $out "what" $what) -}}
{{- if ne (toJson $out.v) (toJson $value) -}}
{{- fail (printf "%s: test failed: %s is %s, not %s" $what $p.path (toJson $out.v) (toJson $value)) -}}
{{- end -}}
{{- else -}}
{{- if or (kindIs "map" $value) (kindIs "slice" $value) }}{{ $value = deepCopy $value }}{{ end -}}
{{- $mode := ternary "add" $op (has $op (list "add" "move" "copy")) -}}
{{- include "natsd.jp.at" (dict "h" .h "k" "doc" "t" $path "mode" $mode "value" $value "what" $what) -}}
{{- end -}}
{{- end -}}

{{/* A JSON Pointer (.ptr) as a JSON list of its reference tokens */}}
{{- define "natsd.jp.tokens" -}}
{{- $ptr := toString .ptr -}}
{{- if eq $ptr "" -}}
[]
{{- else if not (hasPrefix "/" $ptr) -}}
{{- fail (printf "%s: path %q is not a JSON Pointer (\"\" or starting with /)" .what $ptr) -}}
{{- else -}}
{{- $out := list -}}
{{- range rest (splitList "/" $ptr) }}{{ $out = append $out (. | replace "~1" "/" | replace "~0" "~") }}{{ end -}}
{{- toJson $out -}}
{{- end -}}
{{- end -}}

{{/* The value at tokens .t of .node, put in .out.v; fails when there is none */}}
{{- define "natsd.jp.get" -}}
{{- if not .t -}}
{{- $_ := set .out "v" .node -}}
{{- else -}}
{{- $tok := first .t -}}
{{- if kindIs "map" .node -}}
{{- if not (hasKey .node $tok) }}{{ fail (printf "%s: no key %q" .what $tok) }}{{ end -}}
{{- include "natsd.jp.get" (dict "node" (get .node $tok) "t" (rest .t) "out" .out "what" .what) -}}
{{- else if kindIs "slice" .node -}}
{{- if not (regexMatch "^(0|[1-9][0-9]*)$" $tok) }}{{ fail (printf "%s: %q is not an array index" .what $tok) }}{{ end -}}
{{- $i := atoi $tok -}}
{{- if ge $i (len .node) }}{{ fail (printf "%s: index %d is past the end of the array (%d)" .what $i (len .node)) }}{{ end -}}
{{- include "natsd.jp.get" (dict "node" (index .node $i) "t" (rest .t) "out" .out "what" .what) -}}
{{- else -}}
{{- fail (printf "%s: cannot look for %q in a %s" .what $tok (kindOf .node)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* add / replace / remove (.mode) at tokens .t under .h[.k]; maps change in place, a list is
     rebuilt and set back into its holder */}}
{{- define "natsd.jp.at" -}}
{{- $node := get .h .k -}}
{{- if not .t -}}
{{- if eq .mode "remove" }}{{ $_ := set .h .k nil }}{{ else }}{{ $_ := set .h .k .value }}{{ end -}}
{{- else -}}
{{- $tok := first .t -}}
{{- $rest := rest .t -}}
{{- if kindIs "map" $node -}}
{{- if $rest -}}
{{- if not (hasKey $node $tok) }}{{ fail (printf "%s: no key %q" .what $tok) }}{{ end -}}
{{- include "natsd.jp.at" (dict "h" $node "k" $tok "t" $rest "mode" .mode "value" .value "what" .what) -}}
{{- else if eq .mode "add" -}}
{{- $_ := set $node $tok .value -}}
{{- else -}}
{{- if not (hasKey $node $tok) }}{{ fail (printf "%s: no key %q to %s" .what $tok .mode) }}{{ end -}}
{{- if eq .mode "remove" }}{{ $_ := unset $node $tok }}{{ else }}{{ $_ := set $node $tok .value }}{{ end -}}
{{- end -}}
{{- else if kindIs "slice" $node -}}
{{- $n := len $node -}}
{{- $insert := and (eq .mode "add") (not $rest) -}}
{{- $i := 0 -}}
{{- if and $insert (eq $tok "-") -}}
{{- $i = $n -}}
{{- else if regexMatch "^(0|[1-9][0-9]*)$" $tok -}}
{{- $i = atoi $tok -}}
{{- else -}}
{{- fail (printf "%s: %q is not an array index" .what $tok) -}}
{{- end -}}
{{- if or (gt $i $n) (and (not $insert) (eq $i $n)) }}{{ fail (printf "%s: index %d is out of the array (%d)" .what $i $n) }}{{ end -}}
{{- $new := list -}}
{{- if $rest -}}
{{- $tmp := dict "e" (index $node $i) -}}
{{- include "natsd.jp.at" (dict "h" $tmp "k" "e" "t" $rest "mode" .mode "value" .value "what" .what) -}}
{{- $new = concat (slice $node 0 $i) (list $tmp.e) (slice $node (add1 $i)) -}}
{{- else if $insert -}}
{{- $new = concat (slice $node 0 $i) (list .value) (slice $node $i) -}}
{{- else if eq .mode "replace" -}}
{{- $new = concat (slice $node 0 $i) (list .value) (slice $node (add1 $i)) -}}
{{- else -}}
{{- $new = concat (slice $node 0 $i) (slice $node (add1 $i)) -}}
{{- end -}}
{{- $_ := set .h .k $new -}}
{{- else -}}
{{- fail (printf "%s: cannot go into a %s at %q" .what (kindOf $node) $tok) -}}
{{- end -}}
{{- end -}}
{{- end -}}
