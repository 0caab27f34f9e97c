{
  description = "rocforge: build ROCm for the GPUs AMD leaves out (gfx90c, gfx902, ...), reproducibly";

  # Any recent nixpkgs builds rocforge itself; the exported overlay (`rocforge nix export`) has
  # its own requirement on the rocmPackages version (docs/nix.md).
  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";

  outputs =
    { self, nixpkgs }:
    let
      systems = [
        "x86_64-linux"
        "aarch64-linux"
      ];
      forAll = f: nixpkgs.lib.genAttrs systems (system: f nixpkgs.legacyPackages.${system});
      manifest = (builtins.fromTOML (builtins.readFile ../Cargo.toml)).package;
    in
    {
      packages = forAll (pkgs: {
        rocforge = pkgs.rustPlatform.buildRustPackage {
          pname = manifest.name;
          version = manifest.version;
          src = pkgs.lib.cleanSource ../.;
          cargoLock.lockFile = ../Cargo.lock;
          nativeBuildInputs = [ pkgs.pkg-config ];
          buildInputs = [
            pkgs.openssl
            pkgs.zstd
          ];
          # The test suite drives podman, docker, hipcc and a registry on 127.0.0.1: not in the sandbox.
          doCheck = false;
          meta = {
            description = "Declarative, reproducible builds of ROCm components for unsupported AMD GPUs";
            mainProgram = "rocforge";
            platforms = pkgs.lib.platforms.linux;
          };
        };
        default = self.packages.${pkgs.stdenv.hostPlatform.system}.rocforge;
      });

      # The tools rocforge drives: container runtime, git, the build tools of the host runtime,
      # and minisign to check signatures by hand.
      devShells = forAll (pkgs: {
        default = pkgs.mkShell {
          inputsFrom = [ self.packages.${pkgs.stdenv.hostPlatform.system}.rocforge ];
          packages = [
            pkgs.cargo
            pkgs.rustc
            pkgs.clippy
            pkgs.rustfmt
            pkgs.podman
            pkgs.git
            pkgs.cmake
            pkgs.ninja
            pkgs.zstd
            pkgs.minisign
            pkgs.shellcheck
            pkgs.nodejs
          ];
        };
      });
    };
}
