//! A port of the parts of `llvm::Triple` the offload bundler relies on: parsing each
//! component into its enum, `normalize` (component permutation, `unknown` filling, the
//! three/four-field canonical forms) and `isCompatibleWith`.
//!
//! The name tables are LLVM 22's. Two simplifications, both outside anything an offload
//! toolchain produces: ARM/Thumb/AArch64 architecture names that LLVM resolves through its
//! ARM target parser (`armv7a`, `thumbv8m.main`, ...) are recognised by prefix, and their
//! sub-architecture is compared by spelling; shader-model DXIL version rewriting is not
//! modelled.

/// Architecture names (`parseArch`), as (spelling, canonical architecture).
const ARCHES: &[(&str, &str)] = &[
    ("i386", "x86"),
    ("i486", "x86"),
    ("i586", "x86"),
    ("i686", "x86"),
    ("i786", "x86"),
    ("i886", "x86"),
    ("i986", "x86"),
    ("amd64", "x86_64"),
    ("x86_64", "x86_64"),
    ("x86_64h", "x86_64"),
    ("powerpc", "ppc"),
    ("powerpcspe", "ppc"),
    ("ppc", "ppc"),
    ("ppc32", "ppc"),
    ("powerpcle", "ppcle"),
    ("ppcle", "ppcle"),
    ("ppc32le", "ppcle"),
    ("powerpc64", "ppc64"),
    ("ppu", "ppc64"),
    ("ppc64", "ppc64"),
    ("powerpc64le", "ppc64le"),
    ("ppc64le", "ppc64le"),
    ("xscale", "arm"),
    ("xscaleeb", "armeb"),
    ("aarch64", "aarch64"),
    ("aarch64_be", "aarch64_be"),
    ("aarch64_32", "aarch64_32"),
    ("arc", "arc"),
    ("arm64", "aarch64"),
    ("arm64_32", "aarch64_32"),
    ("arm64e", "aarch64"),
    ("arm64ec", "aarch64"),
    ("arm", "arm"),
    ("armeb", "armeb"),
    ("thumb", "thumb"),
    ("thumbeb", "thumbeb"),
    ("avr", "avr"),
    ("m68k", "m68k"),
    ("msp430", "msp430"),
    ("mips", "mips"),
    ("mipseb", "mips"),
    ("mipsallegrex", "mips"),
    ("mipsisa32r6", "mips"),
    ("mipsr6", "mips"),
    ("mipsel", "mipsel"),
    ("mipsallegrexel", "mipsel"),
    ("mipsisa32r6el", "mipsel"),
    ("mipsr6el", "mipsel"),
    ("mips64", "mips64"),
    ("mips64eb", "mips64"),
    ("mipsn32", "mips64"),
    ("mipsisa64r6", "mips64"),
    ("mips64r6", "mips64"),
    ("mipsn32r6", "mips64"),
    ("mips64el", "mips64el"),
    ("mipsn32el", "mips64el"),
    ("mipsisa64r6el", "mips64el"),
    ("mips64r6el", "mips64el"),
    ("mipsn32r6el", "mips64el"),
    ("r600", "r600"),
    ("amdgcn", "amdgcn"),
    ("riscv32", "riscv32"),
    ("riscv64", "riscv64"),
    ("hexagon", "hexagon"),
    ("s390x", "systemz"),
    ("systemz", "systemz"),
    ("sparc", "sparc"),
    ("sparcel", "sparcel"),
    ("sparcv9", "sparcv9"),
    ("sparc64", "sparcv9"),
    ("tce", "tce"),
    ("tcele", "tcele"),
    ("xcore", "xcore"),
    ("nvptx", "nvptx"),
    ("nvptx64", "nvptx64"),
    ("amdil", "amdil"),
    ("amdil64", "amdil64"),
    ("hsail", "hsail"),
    ("hsail64", "hsail64"),
    ("spir", "spir"),
    ("spir64", "spir64"),
    ("spirv", "spirv"),
    ("spirv1.5", "spirv"),
    ("spirv1.6", "spirv"),
    ("spirv32", "spirv32"),
    ("spirv32v1.0", "spirv32"),
    ("spirv32v1.1", "spirv32"),
    ("spirv32v1.2", "spirv32"),
    ("spirv32v1.3", "spirv32"),
    ("spirv32v1.4", "spirv32"),
    ("spirv32v1.5", "spirv32"),
    ("spirv32v1.6", "spirv32"),
    ("spirv64", "spirv64"),
    ("spirv64v1.0", "spirv64"),
    ("spirv64v1.1", "spirv64"),
    ("spirv64v1.2", "spirv64"),
    ("spirv64v1.3", "spirv64"),
    ("spirv64v1.4", "spirv64"),
    ("spirv64v1.5", "spirv64"),
    ("spirv64v1.6", "spirv64"),
    ("lanai", "lanai"),
    ("renderscript32", "renderscript32"),
    ("renderscript64", "renderscript64"),
    ("shave", "shave"),
    ("ve", "ve"),
    ("wasm32", "wasm32"),
    ("wasm64", "wasm64"),
    ("csky", "csky"),
    ("loongarch32", "loongarch32"),
    ("loongarch64", "loongarch64"),
    ("dxil", "dxil"),
    ("dxilv1.0", "dxil"),
    ("dxilv1.1", "dxil"),
    ("dxilv1.2", "dxil"),
    ("dxilv1.3", "dxil"),
    ("dxilv1.4", "dxil"),
    ("dxilv1.5", "dxil"),
    ("dxilv1.6", "dxil"),
    ("dxilv1.7", "dxil"),
    ("dxilv1.8", "dxil"),
    ("xtensa", "xtensa"),
    ("pe", "pe"),
];

const VENDORS: &[(&str, &str)] = &[
    ("apple", "apple"),
    ("pc", "pc"),
    ("scei", "scei"),
    ("sie", "scei"),
    ("fsl", "fsl"),
    ("ibm", "ibm"),
    ("img", "img"),
    ("mti", "mti"),
    ("nvidia", "nvidia"),
    ("csr", "csr"),
    ("amd", "amd"),
    ("mesa", "mesa"),
    ("suse", "suse"),
    ("oe", "oe"),
    ("intel", "intel"),
];

/// OS prefixes (`parseOS`), first match wins.
const OSES: &[(&str, &str)] = &[
    ("darwin", "darwin"),
    ("dragonfly", "dragonfly"),
    ("freebsd", "freebsd"),
    ("fuchsia", "fuchsia"),
    ("ios", "ios"),
    ("kfreebsd", "kfreebsd"),
    ("linux", "linux"),
    ("lv2", "lv2"),
    ("macos", "macosx"),
    ("netbsd", "netbsd"),
    ("openbsd", "openbsd"),
    ("solaris", "solaris"),
    ("uefi", "uefi"),
    ("win32", "windows"),
    ("windows", "windows"),
    ("zos", "zos"),
    ("haiku", "haiku"),
    ("rtems", "rtems"),
    ("nacl", "nacl"),
    ("aix", "aix"),
    ("cuda", "cuda"),
    ("nvcl", "nvcl"),
    ("amdhsa", "amdhsa"),
    ("ps4", "ps4"),
    ("ps5", "ps5"),
    ("elfiamcu", "elfiamcu"),
    ("tvos", "tvos"),
    ("watchos", "watchos"),
    ("bridgeos", "bridgeos"),
    ("driverkit", "driverkit"),
    ("xros", "xros"),
    ("visionos", "xros"),
    ("mesa3d", "mesa3d"),
    ("amdpal", "amdpal"),
    ("hermit", "hermit"),
    ("hurd", "hurd"),
    ("wasi", "wasi"),
    ("emscripten", "emscripten"),
    ("shadermodel", "shadermodel"),
    ("liteos", "liteos"),
    ("serenity", "serenity"),
    ("vulkan", "vulkan"),
];

/// Environment prefixes (`parseEnvironment`), first match wins.
const ENVS: &[&str] = &[
    "eabihf",
    "eabi",
    "gnuabin32",
    "gnuabi64",
    "gnueabihft64",
    "gnueabihf",
    "gnueabit64",
    "gnueabi",
    "gnuf32",
    "gnuf64",
    "gnusf",
    "gnux32",
    "gnu_ilp32",
    "code16",
    "gnut64",
    "gnu",
    "android",
    "muslabin32",
    "muslabi64",
    "musleabihf",
    "musleabi",
    "muslf32",
    "muslsf",
    "muslx32",
    "musl",
    "msvc",
    "itanium",
    "cygnus",
    "coreclr",
    "simulator",
    "macabi",
    "pixel",
    "vertex",
    "geometry",
    "hull",
    "domain",
    "compute",
    "library",
    "raygeneration",
    "intersection",
    "anyhit",
    "closesthit",
    "miss",
    "callable",
    "mesh",
    "amplification",
    "opencl",
    "ohos",
    "pauthtest",
    "llvm",
];

/// Object-format suffixes (`parseFormat`), first match wins.
const FORMATS: &[(&str, &str)] = &[
    ("xcoff", "xcoff"),
    ("coff", "coff"),
    ("elf", "elf"),
    ("goff", "goff"),
    ("macho", "macho"),
    ("wasm", "wasm"),
    ("spirv", "spirv"),
];

/// `parseArch`.
pub fn parse_arch(name: &str) -> Option<&'static str> {
    if let Some((_, a)) = ARCHES.iter().find(|(n, _)| *n == name) {
        return Some(a);
    }
    if name.starts_with("kalimba") {
        return Some("kalimba");
    }
    if let Some(rest) = name.strip_prefix("bpf") {
        return match rest {
            "" | "_le" | "el" => Some("bpfel"),
            "_be" | "eb" => Some("bpfeb"),
            _ => None,
        };
    }
    // ARM family names go through LLVM's ARM target parser; recognise them by prefix.
    let big = name.ends_with("eb") || name.ends_with("_be");
    if name.starts_with("aarch64") {
        return Some(if big { "aarch64_be" } else { "aarch64" });
    }
    if name.starts_with("thumb") {
        return Some(if big { "thumbeb" } else { "thumb" });
    }
    if name.starts_with("arm") && name.len() > 3 {
        return Some(if big { "armeb" } else { "arm" });
    }
    None
}

/// `parseSubArch`, reduced to what distinguishes two spellings of one architecture.
fn parse_subarch(name: &str) -> String {
    if name.starts_with("mips") && (name.ends_with("r6el") || name.ends_with("r6")) {
        return "mips_r6".into();
    }
    if matches!(name, "powerpcspe" | "arm64e" | "arm64ec") {
        return name.into();
    }
    if name.starts_with("spirv") || name.starts_with("dxil") {
        return name
            .rfind('v')
            .filter(|&i| i > 0 && name[i + 1..].starts_with('1'))
            .map(|i| name[i..].to_string())
            .unwrap_or_default();
    }
    if let Some(v) = name.strip_prefix("kalimba") {
        return v.to_string();
    }
    if name.starts_with("arm") || name.starts_with("thumb") {
        let v = name
            .trim_start_matches("arm")
            .trim_start_matches("thumb")
            .trim_end_matches("eb");
        return v.to_string();
    }
    String::new()
}

/// `parseVendor`.
pub fn parse_vendor(name: &str) -> Option<&'static str> {
    VENDORS.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}

/// `parseOS`.
pub fn parse_os(name: &str) -> Option<&'static str> {
    OSES.iter()
        .find(|(p, _)| name.starts_with(p))
        .map(|(_, o)| *o)
}

/// `parseEnvironment`.
pub fn parse_env(name: &str) -> Option<&'static str> {
    ENVS.iter().find(|p| name.starts_with(*p)).copied()
}

/// `parseFormat`.
fn parse_format(name: &str) -> Option<&'static str> {
    FORMATS
        .iter()
        .find(|(s, _)| name.ends_with(s))
        .map(|(_, f)| *f)
}

fn is_darwin(os: Option<&str>) -> bool {
    matches!(
        os,
        Some("darwin" | "macosx" | "ios" | "tvos" | "watchos" | "bridgeos" | "driverkit" | "xros")
    )
}

/// A triple as `llvm::Triple(Arch, Vendor, OS, Environment)` holds it: the spelling and
/// the parsed value of each component.
#[derive(Clone, Debug)]
pub struct Triple {
    /// The four components as given.
    pub names: [String; 4],
    arch: Option<&'static str>,
    subarch: String,
    vendor: Option<&'static str>,
    os: Option<&'static str>,
    env: Option<&'static str>,
    format: &'static str,
}

impl Triple {
    /// Builds the triple from its four components, parsing each in place (no reordering).
    pub fn from_parts(arch: &str, vendor: &str, os: &str, env: &str) -> Triple {
        let a = parse_arch(arch);
        let o = parse_os(os);
        let format = parse_format(env).unwrap_or_else(|| default_format(a, o));
        Triple {
            names: [arch.into(), vendor.into(), os.into(), env.into()],
            arch: a,
            subarch: parse_subarch(arch),
            vendor: parse_vendor(vendor),
            os: o,
            env: parse_env(env),
            format,
        }
    }

    /// `Triple::str()`: the components joined with `-`.
    pub fn str(&self) -> String {
        self.names.join("-")
    }

    /// The canonical architecture (`None` for an unknown one).
    pub fn arch(&self) -> Option<&'static str> {
        self.arch
    }

    /// The parsed OS.
    pub fn os(&self) -> Option<&'static str> {
        self.os
    }

    /// `isAMDGPU`: `amdgcn` or `r600`.
    pub fn is_amdgpu(&self) -> bool {
        matches!(self.arch, Some("amdgcn" | "r600"))
    }

    /// `isAMDGCN`.
    pub fn is_amdgcn(&self) -> bool {
        self.arch == Some("amdgcn")
    }

    /// `Triple::normalize(Data, Form)` with `form` 3 or 4 components.
    pub fn normalize(&self, form: usize) -> String {
        normalize(&self.str(), Some(form))
    }

    /// `isCompatibleWith`.
    pub fn is_compatible_with(&self, other: &Triple) -> bool {
        let ignore_vendor = self.os == Some("windows") && self.env == Some("gnu");
        let vendor_ok = self.vendor == other.vendor || ignore_vendor;
        let arm_thumb = matches!(
            (self.arch, other.arch),
            (Some("thumb"), Some("arm"))
                | (Some("arm"), Some("thumb"))
                | (Some("thumbeb"), Some("armeb"))
                | (Some("armeb"), Some("thumbeb"))
        );
        if arm_thumb {
            if self.vendor == Some("apple") {
                return self.subarch == other.subarch
                    && self.vendor == other.vendor
                    && self.os == other.os;
            }
            return self.subarch == other.subarch
                && vendor_ok
                && self.os == other.os
                && self.env == other.env
                && self.format == other.format;
        }
        if self.vendor == Some("apple") {
            return self.arch == other.arch
                && self.subarch == other.subarch
                && vendor_ok
                && self.os == other.os;
        }
        self.arch == other.arch
            && self.subarch == other.subarch
            && vendor_ok
            && self.os == other.os
            && self.env == other.env
            && self.format == other.format
    }
}

/// `getDefaultFormat`.
fn default_format(arch: Option<&str>, os: Option<&str>) -> &'static str {
    match arch {
        None | Some("aarch64" | "aarch64_32" | "arm" | "thumb" | "x86" | "x86_64") => {
            if matches!(os, Some("windows" | "uefi")) {
                "coff"
            } else if is_darwin(os) {
                "macho"
            } else {
                "elf"
            }
        }
        Some("mipsel") if os == Some("windows") => "coff",
        Some("ppc64" | "ppc") if os == Some("aix") => "xcoff",
        Some("ppc64" | "ppc") if is_darwin(os) => "macho",
        Some("systemz") if os == Some("zos") => "goff",
        Some("wasm32" | "wasm64") => "wasm",
        Some("spirv" | "spirv32" | "spirv64") => "spirv",
        Some("dxil") => "dxcontainer",
        _ => "elf",
    }
}

/// `Triple::normalize(Str, Form)`; `form` is `None` for `CanonicalForm::ANY`, else the
/// number of components.
pub fn normalize(s: &str, form: Option<usize>) -> String {
    let mut comps: Vec<String> = s.split('-').map(str::to_string).collect();
    let mut parsed = Components::in_place(&comps);
    let found = parsed.permute(&mut comps);
    // If "none" is in the middle component in a three-component triple, treat it as the
    // OS instead of the vendor.
    if found[0]
        && !found[1]
        && !found[2]
        && found[3]
        && comps.len() > 2
        && comps[1] == "none"
        && comps[2].is_empty()
    {
        comps.swap(1, 2);
    }
    for c in comps.iter_mut() {
        if c.is_empty() {
            *c = "unknown".into();
        }
    }
    parsed.special_cases(&mut comps);
    if comps.first().map(String::as_str) == Some("dxil") && comps.len() > 4 {
        comps.truncate(4);
    }
    if let Some(n) = form {
        comps.resize(n, "unknown".into());
    }
    comps.join("-")
}

/// What `Triple::normalize` has parsed of the components; permuting them updates it as
/// each position is searched.
struct Components {
    arch: Option<&'static str>,
    vendor: Option<&'static str>,
    os: Option<&'static str>,
    is_cygwin: bool,
    is_mingw: bool,
    env: Option<&'static str>,
    format: Option<&'static str>,
}

impl Components {
    /// The components parsed where they stand (arch, vendor, OS, environment, format).
    fn in_place(comps: &[String]) -> Self {
        let get = |i: usize| comps.get(i).map(String::as_str);
        Components {
            arch: get(0).and_then(parse_arch),
            vendor: get(1).and_then(parse_vendor),
            os: get(2).and_then(parse_os),
            is_cygwin: get(2).is_some_and(|c| c.starts_with("cygwin")),
            is_mingw: get(2).is_some_and(|c| c.starts_with("mingw")),
            env: get(3).and_then(parse_env),
            format: get(4).and_then(parse_format),
        }
    }

    /// The permutation loop: every position not already filled takes the first free
    /// component that parses for it, moved there ([`move_component`]). Returns which
    /// positions were found.
    fn permute(&mut self, comps: &mut Vec<String>) -> [bool; 4] {
        let mut found = [
            self.arch.is_some(),
            self.vendor.is_some(),
            self.os.is_some(),
            self.env.is_some(),
        ];
        for pos in 0..4 {
            if found[pos] {
                continue;
            }
            // Do not reparse any components that already matched.
            let matching = (0..comps.len())
                .filter(|&idx| !(idx < 4 && found[idx]))
                .find(|&idx| self.parse_as(pos, &comps[idx]));
            if let Some(idx) = matching {
                move_component(comps, &found, pos, idx);
                found[pos] = true;
            }
        }
        found
    }

    /// The `switch (Pos)` of the permutation loop: whether `comp` is valid for `pos`
    /// (parsing it overwrites that position's value, as in LLVM).
    fn parse_as(&mut self, pos: usize, comp: &str) -> bool {
        match pos {
            0 => {
                self.arch = parse_arch(comp);
                self.arch.is_some()
            }
            1 => {
                self.vendor = parse_vendor(comp);
                self.vendor.is_some()
            }
            2 => {
                self.os = parse_os(comp);
                self.is_cygwin = comp.starts_with("cygwin");
                self.is_mingw = comp.starts_with("mingw");
                self.os.is_some() || self.is_cygwin || self.is_mingw
            }
            _ => {
                self.env = parse_env(comp);
                if self.env.is_some() {
                    true
                } else {
                    self.format = parse_format(comp);
                    self.format.is_some()
                }
            }
        }
    }

    /// The special cases after the permutation: Android's `androideabi`, SUSE's
    /// `gnueabi`, Windows environments and object formats.
    fn special_cases(&self, comps: &mut Vec<String>) {
        let (vendor, os, env, format) = (self.vendor, self.os, self.env, self.format);
        let (is_mingw, is_cygwin) = (self.is_mingw, self.is_cygwin);
        if env == Some("android") && comps.len() > 3 && comps[3].starts_with("androideabi") {
            let v = comps[3]["androideabi".len()..].to_string();
            comps[3] = format!("android{v}");
        }
        if vendor == Some("suse") && env == Some("gnueabi") && comps.len() > 3 {
            comps[3] = "gnueabihf".into();
        }
        if os == Some("windows") {
            comps.resize(4, String::new());
            comps[2] = "windows".into();
            if env.is_none() {
                comps[3] = match format {
                    None | Some("coff") => "msvc".into(),
                    Some(f) => f.into(),
                };
            }
        } else if is_mingw {
            comps.resize(4, String::new());
            comps[2] = "windows".into();
            comps[3] = "gnu".into();
        } else if is_cygwin {
            comps.resize(4, String::new());
            comps[2] = "windows".into();
            comps[3] = "cygnus".into();
        }
        if (is_mingw || is_cygwin || (os == Some("windows") && env.is_some()))
            && format.is_some_and(|f| f != "coff")
        {
            comps.resize(5, String::new());
            comps[4] = format.unwrap_or_default().into();
        }
    }
}

/// Moves component `idx` to position `pos` (of the four), pushing the components that are
/// not fixed (`found`) and in the way to the right.
fn move_component(comps: &mut Vec<String>, found: &[bool; 4], pos: usize, mut idx: usize) {
    if pos < idx {
        // Insert left, pushing the components in between to the right.
        let mut current = std::mem::take(&mut comps[idx]);
        let mut i = pos;
        while !current.is_empty() {
            while i < 4 && found[i] {
                i += 1;
            }
            if i >= comps.len() {
                comps.push(String::new());
            }
            std::mem::swap(&mut current, &mut comps[i]);
            i += 1;
        }
    } else if pos > idx {
        // Push right by inserting empty components until it reaches `pos`.
        loop {
            let mut current = String::new();
            let mut i = idx;
            while i < comps.len() {
                std::mem::swap(&mut current, &mut comps[i]);
                if current.is_empty() {
                    break;
                }
                i += 1;
                while i < 4 && found[i] {
                    i += 1;
                }
            }
            if !current.is_empty() {
                comps.push(current);
            }
            idx += 1;
            while idx < 4 && found[idx] {
                idx += 1;
            }
            if idx >= pos {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_like_llvm() {
        assert_eq!(
            normalize("amdgcn-amd-amdhsa-", Some(3)),
            "amdgcn-amd-amdhsa"
        );
        assert_eq!(
            normalize("amdgcn-amd-amdhsa-gnu", Some(3)),
            "amdgcn-amd-amdhsa"
        );
        assert_eq!(
            normalize("nvptx64-nvidia-cuda-", Some(4)),
            "nvptx64-nvidia-cuda-unknown"
        );
        assert_eq!(
            normalize("x86_64--linux-gnu", Some(4)),
            "x86_64-unknown-linux-gnu"
        );
        assert_eq!(
            normalize("amdgcn--amdhsa-", Some(3)),
            "amdgcn-unknown-amdhsa"
        );
        // Components out of place are moved: a forgotten vendor.
        assert_eq!(
            normalize("x86_64-linux-gnu-", Some(4)),
            "x86_64-unknown-linux-gnu"
        );
        assert_eq!(normalize("i386-pc-win32-", Some(4)), "i386-pc-windows-msvc");
    }

    #[test]
    fn compatibility_compares_parsed_components() {
        let a = Triple::from_parts("amdgcn", "amd", "amdhsa", "");
        let b = Triple::from_parts("amdgcn", "amd", "amdhsa", "unknown");
        let c = Triple::from_parts("amdgcn", "amd", "amdhsa", "gnu");
        assert!(a.is_compatible_with(&b));
        assert!(!a.is_compatible_with(&c));
        let h1 = Triple::from_parts("x86_64", "pc", "linux", "gnu");
        let h2 = Triple::from_parts("x86_64", "unknown", "linux", "gnu");
        assert!(!h1.is_compatible_with(&h2));
        assert!(Triple::from_parts("i386", "", "linux", "")
            .is_compatible_with(&Triple::from_parts("i686", "unknown", "linux", "")));
    }
}
