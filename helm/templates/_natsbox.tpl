{{/* nats-box: names, labels, and the files of its contexts */}}
{{- define "natsd.box.name" -}}
{{- default (printf "%s-box" (include "natsd.fullname" .)) .Values.natsBox.deployment.name -}}
{{- end -}}
{{- define "natsd.box.contextsSecretName" -}}
{{- default (printf "%s-box-contexts" (include "natsd.fullname" .)) .Values.natsBox.contextsSecret.name -}}
{{- end -}}
{{- define "natsd.box.contentsSecretName" -}}
{{- default (printf "%s-box-contents" (include "natsd.fullname" .)) .Values.natsBox.contentsSecret.name -}}
{{- end -}}
{{- define "natsd.box.serviceAccountName" -}}
{{- default (printf "%s-box" (include "natsd.fullname" .)) .Values.natsBox.serviceAccount.name -}}
{{- end -}}
{{- define "natsd.box.selectorLabels" -}}
app.kubernetes.io/name: {{ include "natsd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: nats-box
{{- end -}}
{{- define "natsd.box.labels" -}}
{{ include "natsd.box.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.global.labels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Per context and kind (creds, nkey, tls): where its file(s) are. JSON
     {"<ctx>": {"creds": {"file": ..., "secret": ..., "dir": ...}, ...}, "_contents": bool} */}}
{{- define "natsd.box.files" -}}
{{- $out := dict "_contents" false -}}
{{- range $name, $ctx := .Values.natsBox.contexts -}}
{{- $c := dict -}}
{{- range $kind, $d := dict "creds" (list "nats-creds" "nats.creds" "creds") "nkey" (list "nats-nkeys" "nats.nk" "nk") -}}
{{- $s := get ($ctx | default dict) $kind | default dict -}}
{{- if $s.contents -}}
{{- $_ := set $c $kind (dict "file" (printf "/etc/nats-contents/%s.%s" $name (index $d 2))) -}}
{{- $_ := set $out "_contents" true -}}
{{- else if $s.secretName -}}
{{- $dir := trimSuffix "/" (default (printf "/etc/%s/%s" (index $d 0) $name) $s.dir) -}}
{{- $_ := set $c $kind (dict "file" (printf "%s/%s" $dir (default (index $d 1) $s.key)) "secret" $s.secretName "dir" $dir) -}}
{{- end -}}
{{- end -}}
{{- $t := get ($ctx | default dict) "tls" | default dict -}}
{{- if $t.secretName -}}
{{- $dir := trimSuffix "/" (default (printf "/etc/nats-certs/%s" $name) $t.dir) -}}
{{- $_ := set $c "tls" (dict "cert" (printf "%s/%s" $dir (default "tls.crt" $t.cert)) "key" (printf "%s/%s" $dir (default "tls.key" $t.key)) "secret" $t.secretName "dir" $dir) -}}
{{- end -}}
{{- $_ := set $out $name $c -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* The Secret volumes of the contexts: a JSON list of {name, secret, dir} */}}
{{- define "natsd.box.secretVolumes" -}}
{{- $files := include "natsd.box.files" . | fromJson -}}
{{- $vols := list -}}
{{- range $name := keys .Values.natsBox.contexts | sortAlpha -}}
{{- range $kind := list "creds" "nkey" "tls" -}}
{{- $f := get (get $files $name) $kind -}}
{{- if and $f $f.secret -}}
{{- $vols = append $vols (dict "name" (printf "ctx-%s-%s" $name $kind | lower) "secret" $f.secret "dir" $f.dir) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson $vols -}}
{{- end -}}
